"""bench/tpu_memory.py: the state's bytes by part, the compiled step's memory, the verdict."""

import jax
import jax.numpy as jnp
import pytest

from bench import tpu_memory
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import trainer as trainer_lib


def test_tree_bytes_counts_shapes_and_dtypes():
    tree = {"a": jax.ShapeDtypeStruct((3, 4), jnp.float32), "b": [jnp.zeros((5,), jnp.bfloat16)]}
    assert tpu_memory.tree_bytes(tree) == 3 * 4 * 4 + 5 * 2


def test_the_state_breakdown_adds_up_and_the_buffer_is_the_big_part():
    config = config_lib.load("tiny")
    run = trainer_lib.Trainer(config)
    parts = tpu_memory.state_breakdown(run.abstract_state())
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    assert parts["other"] >= 0
    # AdamW keeps two moments per parameter
    assert parts["optimizer"] >= 2 * parts["params"]
    assert parts["replay_buffer"] > parts["params"]


def _check_step(step: dict, state: dict):
    assert step["peak"] == (step["arguments"] + step["outputs"] + step["temporaries"]
                            - step["aliased"] + step["generated_code"])
    assert step["arguments"] >= state["total"]  # the state goes in (padded on a TPU)
    assert step["aliased"] > 0  # the donated state is updated in place


def test_the_report_compiles_the_step_and_judges_against_the_budget():
    r = tpu_memory.report("tiny", device_gb=16.0, budget=0.8, compiler="cpu")
    assert list(r["step_bytes"]) == ["cpu"] and r["judged_by"] == "cpu"
    step = r["step_bytes"]["cpu"]
    _check_step(step, r["state_bytes"])
    assert r["fits"]
    tight = tpu_memory.report("tiny", device_gb=step["peak"] / 1e9 / 2, budget=1.0,
                              compiler="cpu")
    assert not tight["fits"]
    assert "DOES NOT FIT" in tpu_memory.format_report(tight)
    assert "FITS: peak" in tpu_memory.format_report(r)
    assert "the CPU compiler, an estimate" in tpu_memory.format_report(r)


def test_without_libtpu_auto_falls_back_to_the_cpu_and_says_so(monkeypatch):
    def no_libtpu(topology):
        raise RuntimeError("JAX TPU support not installed")

    monkeypatch.setattr(tpu_memory, "tpu_devices", no_libtpu)
    r = tpu_memory.report("tiny", device_gb=16.0, budget=0.8)
    assert list(r["step_bytes"]) == ["cpu"] and r["judged_by"] == "cpu"
    assert "JAX TPU support not installed" in r["note"]
    assert r["note"] in tpu_memory.format_report(r)
    with pytest.raises(RuntimeError, match="not installed"):
        tpu_memory.report("tiny", device_gb=16.0, budget=0.8, compiler="tpu")


# the tests' persistent compilation cache (conftest) cannot load a compile-only program
@pytest.mark.filterwarnings("ignore:Error reading persistent compilation cache")
def test_with_libtpu_the_tpu_compiler_judges(monkeypatch):
    for name, value in tpu_memory._DEVICELESS_ENV.items():  # set here, undone after the test
        monkeypatch.setenv(name, value)
    try:
        tpu_memory.tpu_devices()
    except RuntimeError as e:
        pytest.skip(f"no libtpu ({e}): pip install 'c4jax[tpu]' or set TPU_LIBRARY_PATH")
    r = tpu_memory.report("tiny", device_gb=16.0, budget=0.8, compiler="tpu")
    assert r["judged_by"] == "tpu" and "TPU v5" in r["tpu_device"]
    _check_step(r["step_bytes"]["tpu"], r["state_bytes"])
    assert r["peak_fraction_of_device"] == r["step_bytes"]["tpu"]["peak"] / 16e9


def test_the_table_has_a_column_per_compiler():
    step = {"arguments": 2e6, "outputs": 2e6, "temporaries": 5e6, "aliased": 2e6,
            "generated_code": 1e6, "peak": 8e6}
    r = {"config": "x", "device_gb": 16.0, "budget": 0.8, "state_bytes": {"total": 1e6},
         "step_bytes": {"cpu": step, "tpu": step}, "judged_by": "tpu", "fits": True,
         "peak_fraction_of_device": 8e6 / 16e9, "tpu_device": "TPU v5 lite (v5e:1x1)"}
    text = tpu_memory.format_report(r)
    assert "| fused step (XLA memory analysis) | CPU MB | TPU MB |" in text
    assert "| temporaries | 5.0 | 5.0 |" in text
    assert "FITS: peak 0.01 GB = 0.1% of 16 GB (budget 80%; the TPU compiler)" in text


@pytest.mark.parametrize("argv, message", [
    (["--device-gb", "0"], "--device-gb"),
    (["--budget", "1.5"], "--budget"),
    (["--compiler", "gpu"], "--compiler"),
])
def test_bad_arguments_are_rejected_naming_the_flag(argv, message, usage_error):
    assert message in usage_error(tpu_memory.parse_args, argv)
