"""bench/tpu_memory.py: the state's bytes by part, the compiled step's memory, the verdict."""

import jax
import jax.numpy as jnp
import pytest

from bench import tpu_memory
from c4jax import config as config_lib
from c4jax import trainer as trainer_lib


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


def test_the_report_compiles_the_step_and_judges_against_the_budget():
    r = tpu_memory.report("tiny", device_gb=16.0, budget=0.8)
    step = r["step_bytes"]
    assert step["peak"] == step["arguments"] + step["outputs"] + step["temporaries"] \
        - step["aliased"]
    assert step["arguments"] >= r["state_bytes"]["total"]  # the state goes in
    assert r["fits"]
    tight = tpu_memory.report("tiny", device_gb=step["peak"] / 1e9 / 2, budget=1.0)
    assert not tight["fits"]
    assert "DOES NOT FIT" in tpu_memory.format_report(tight)
    assert "FITS: peak" in tpu_memory.format_report(r)


@pytest.mark.parametrize("argv, message", [
    (["--device-gb", "0"], "--device-gb"),
    (["--budget", "1.5"], "--budget"),
])
def test_bad_arguments_are_rejected_naming_the_flag(argv, message, usage_error):
    assert message in usage_error(tpu_memory.parse_args, argv)
