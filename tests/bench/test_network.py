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
    assert set(row) == {"batch", "forward", "forward_module", "train", "im2col_matmul",
                        "matmul_2048"}
    c = network.channels
    assert row["im2col_matmul"]["flops"] == 2 * 8 * 42 * 9 * c * c
    assert row["matmul_2048"]["flops"] == 2 * 2048**3
    # the gradient costs more arithmetic than the forward pass
    assert row["train"]["flops"] > 2 * row["forward"]["flops"] > 0
    # folding BatchNorm leaves the convolutions' arithmetic and drops the normalisation
    assert 0.8 * row["forward_module"]["flops"] < row["forward"]["flops"]
    assert row["forward"]["flops"] < row["forward_module"]["flops"]
    for case in ("forward", "forward_module", "train", "im2col_matmul", "matmul_2048"):
        r = row[case]
        assert r["gflops_per_s"] == pytest.approx(r["flops"] / r["seconds"] / 1e9)


def test_the_table_shows_each_rate_and_the_distance_to_the_matmul():
    def case(ms, gflops):
        return {"seconds": ms / 1e3, "gflops_per_s": gflops, "flops": 0}

    row = {"batch": 256, "forward": case(20.0, 50.0), "forward_module": case(22.0, 47.0),
           "train": case(70.0, 40.0), "im2col_matmul": case(2.0, 100.0),
           "matmul_2048": case(140.0, 120.0)}
    assert "| 256 | 20.0 | 50.0 | 22.0 | 47.0 | 70.0 | 40.0 | 100.0 | 120.0 | 0.50 |" in \
        bench_network.table([row])


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
