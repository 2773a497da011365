"""bench/bench_network.py: XLA's FLOP count, the timed cases, the table, its errors."""

import json

import jax
import jax.numpy as jnp
import pytest

from bench import bench_network
from c4jax.alphazero import config as config_lib


def test_flops_of_a_matmul_is_two_m_k_n():
    fn = jax.jit(lambda a, b: a @ b)
    a, b = jnp.ones((12, 5)), jnp.ones((5, 3))
    assert bench_network.flops_of(fn, a, b) == 2 * 12 * 5 * 3


def test_a_row_times_the_network_and_the_matmuls_of_its_size():
    network = config_lib.load("tiny").network
    row = bench_network.measure(network, batch=8, repeats=1)
    assert set(row) == {"batch", "forward", "forward_module", "train", "train_forward",
                        "conv", "conv_input_grad", "conv_weight_grad", "im2col_matmul",
                        "matmul_2048"}
    c = network.channels
    assert row["im2col_matmul"]["flops"] == 2 * 8 * 42 * 9 * c * c
    assert row["matmul_2048"]["flops"] == 2 * 2048**3
    # the gradient costs more arithmetic than the forward pass, and holds it
    assert row["train"]["flops"] > 2 * row["forward"]["flops"] > 0
    assert row["forward"]["flops"] < row["train_forward"]["flops"] < row["train"]["flops"]
    # one convolution of the tower: the XLA count of [8, 6, 7, C] by [3, 3, C, C],
    # without the taps on the padding (30 of the 42 cells see all nine)
    taps = sum(len([1 for dh in (-1, 0, 1) for dw in (-1, 0, 1)
                    if 0 <= h + dh < 6 and 0 <= w + dw < 7]) for h in range(6) for w in range(7))
    for case in ("conv", "conv_input_grad", "conv_weight_grad"):
        assert row[case]["flops"] == 2 * 8 * taps * c * c
    # folding BatchNorm leaves the convolutions' arithmetic and drops the normalisation
    assert 0.8 * row["forward_module"]["flops"] < row["forward"]["flops"]
    assert row["forward"]["flops"] < row["forward_module"]["flops"]
    for case in ("forward", "forward_module", "train", "train_forward", "conv",
                 "conv_input_grad", "conv_weight_grad", "im2col_matmul", "matmul_2048"):
        r = row[case]
        assert r["gflops_per_s"] == pytest.approx(r["flops"] / r["seconds"] / 1e9)


def _timed(ms, gflops):
    """A case of a ``measure`` row that took ``ms`` milliseconds at ``gflops`` GFLOP/s."""
    return {"seconds": ms / 1e3, "gflops_per_s": gflops, "flops": 0}


def test_the_table_shows_each_rate_and_the_distance_to_the_matmul():
    row = {"batch": 256, "forward": _timed(20.0, 50.0), "forward_module": _timed(22.0, 47.0),
           "train": _timed(70.0, 40.0), "im2col_matmul": _timed(2.0, 100.0),
           "matmul_2048": _timed(140.0, 120.0)}
    assert "| 256 | 20.0 | 50.0 | 22.0 | 47.0 | 70.0 | 40.0 | 100.0 | 120.0 | 0.50 |" in \
        bench_network.table([row])


def test_the_convolution_programs_compute_the_convolution_and_its_gradients():
    x = jax.random.normal(jax.random.key(0), (3, 6, 7, 4))
    kernel = jax.random.normal(jax.random.key(1), (3, 3, 4, 4))
    dy = jax.random.normal(jax.random.key(2), (3, 6, 7, 4))

    def reference(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    _, pullback = jax.vjp(reference, x, kernel)
    dx, dw = pullback(dy)
    assert jnp.allclose(bench_network.conv_forward(x, kernel), reference(x, kernel), atol=1e-4)
    cases = bench_network.conv_cases(x, kernel, dy)
    # each program sums CONV_LOOP results whose inputs drift by ~1e-9 a call
    for name, expected in (("conv", reference(x, kernel)), ("conv_input_grad", dx),
                           ("conv_weight_grad", dw)):
        fn, args = cases[name]
        total = float(fn(*args))
        assert total == pytest.approx(bench_network.CONV_LOOP * float(jnp.sum(expected)),
                                      rel=1e-3, abs=1e-2)


def test_the_training_table_splits_the_step_and_rates_each_convolution():
    row = {"batch": 128, "train": _timed(30.0, 50.0), "train_forward": _timed(12.0, 40.0),
           "conv": _timed(1.0, 100.0), "conv_input_grad": _timed(0.9, 105.0),
           "conv_weight_grad": _timed(1.3, 75.0)}
    assert ("| 128 | 30.0 | 12.0 | 18.0 | 1.00 | 100.0 | 0.90 | 105.0 | 1.30 | 75.0 |"
            in bench_network.training_table([row]))


@pytest.mark.parametrize("argv, message", [
    (["--batches", "8,x"], "comma-separated integers"),
    (["--batches", "0"], ">= 1"),
    (["--repeats", "0"], "--repeats"),
])
def test_bad_arguments_are_rejected_naming_the_flag(argv, message, usage_error):
    assert message in usage_error(bench_network.parse_args, argv)


def test_the_results_file_names_the_machine(tmp_path):
    out = tmp_path / "network.json"
    assert bench_network.main(["--config", "tiny", "--batches", "4", "--repeats", "1",
                               "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [row["batch"] for row in record["rows"]] == [4]
    device = record["meta"]["device"]
    assert device["jax_version"] == jax.__version__
    assert "cpu_model" in device and "flax_version" in device
