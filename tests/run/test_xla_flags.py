"""c4jax.run.xla_flags: the YNNPACK flag is added only where XLA can take it, and it
computes the same network (the flag changes the code path, not the mathematics)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from c4jax.run import xla_flags

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh(monkeypatch):
    """As before JAX starts its backends, with a jaxlib that knows the flag."""
    monkeypatch.setattr(xla_flags, "_backends_started", lambda: False)
    monkeypatch.setattr(xla_flags, "jaxlib_knows", lambda name: True)


def test_the_flag_is_appended_to_the_users_flags(fresh):
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    assert xla_flags.enable_fast_cpu(env) == "enabled"
    assert env["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=2", xla_flags.YNN_FLAG]
    assert xla_flags.fast_cpu_on(env) and "YNNPACK fusion on" in xla_flags.describe(env)
    assert xla_flags.enable_fast_cpu(env) == "set by the user"  # never twice
    assert env["XLA_FLAGS"].count(xla_flags.YNN_FLAG_NAME) == 1

    empty = {}
    assert xla_flags.enable_fast_cpu(empty) == "enabled"
    assert empty["XLA_FLAGS"] == xla_flags.YNN_FLAG


@pytest.mark.parametrize("value", ["0", "false", "off", " No "])
def test_the_user_can_opt_out(fresh, value):
    env = {xla_flags.OPT_OUT: value}
    assert xla_flags.enable_fast_cpu(env) == "opted out"
    assert "XLA_FLAGS" not in env
    assert not xla_flags.fast_cpu_on(env) and "off" in xla_flags.describe(env)


def test_the_users_own_value_wins(fresh):
    mine = "--xla_cpu_experimental_ynn_fusion_type=dot"
    env = {"XLA_FLAGS": mine}
    assert xla_flags.enable_fast_cpu(env) == "set by the user"
    assert env["XLA_FLAGS"] == mine and not xla_flags.fast_cpu_on(env)


def test_nothing_is_added_where_xla_would_abort_or_ignore_it(monkeypatch):
    env = {}
    monkeypatch.setattr(xla_flags, "_backends_started", lambda: False)
    monkeypatch.setattr(xla_flags, "jaxlib_knows", lambda name: False)
    assert xla_flags.enable_fast_cpu(env) == "unknown to this jaxlib"  # XLA aborts on it
    monkeypatch.setattr(xla_flags, "jaxlib_knows", lambda name: True)
    monkeypatch.setattr(xla_flags, "_backends_started", lambda: True)
    assert xla_flags.enable_fast_cpu(env) == "backend already started"  # too late to count
    assert env == {}


def test_the_installed_jaxlib_knows_the_flag():
    # If a jaxlib release renames or drops this experimental flag, c4jax silently
    # stops using it (and runs ~1.75x slower on a CPU): this test says so first.
    assert xla_flags.jaxlib_knows(xla_flags.YNN_FLAG_NAME), (
        f"jaxlib no longer defines {xla_flags.YNN_FLAG_NAME}: find its successor")
    assert not xla_flags.jaxlib_knows("xla_cpu_no_such_flag_in_any_jaxlib")


_CHILD = """
import json, sys
import numpy as np
from c4jax.run import xla_flags
status = xla_flags.enable_fast_cpu()
import jax, jax.numpy as jnp
from c4jax.alphazero import network
from c4jax.alphazero.config import NetworkConfig
net = network.make_network(NetworkConfig(num_blocks=2, channels=16))
variables = network.init_variables(net, jax.random.key(0))
obs = (jax.random.uniform(jax.random.key(1), (64, 6, 7, 2)) < 0.3).astype(jnp.float32)
logits, value = jax.jit(lambda v, o: net.apply(v, o))(variables, obs)
def loss(params):
    (l, v), _ = net.apply({**variables, "params": params}, obs, train=True,
                          mutable=["batch_stats"])
    return jnp.mean(l ** 2) + jnp.mean(v ** 2)
grads = jax.jit(jax.grad(loss))(variables["params"])
flat = np.concatenate([np.ravel(g) for g in jax.tree.leaves(grads)])
np.savez(sys.argv[1], logits=logits, value=value, grads=flat)
print(json.dumps({"status": status, "on": xla_flags.fast_cpu_on()}))
"""


def _child(tmp_path, name, **env):
    """The child on the session's XLA flags (cheap compiles, ``xla_env``) without the
    YNNPACK flag, which the child adds itself unless it opts out. (YNNPACK's fusion
    acts at those flags too: on a 2-core AMD EPYC the value and the gradients differ
    in the last bits with and without it.)"""
    out = tmp_path / f"{name}.npz"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if xla_flags.YNN_FLAG_NAME not in f]
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, str(out)], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": " ".join(flags), **env},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), np.load(out)


@pytest.mark.slow
def test_the_network_computes_the_same_with_and_without_the_flag(tmp_path):
    on_status, on = _child(tmp_path, "on")
    off_status, off = _child(tmp_path, "off", **{xla_flags.OPT_OUT: "0"})
    assert on_status == {"status": "enabled", "on": True}
    assert off_status == {"status": "opted out", "on": False}
    # Another summation order: equal to float32 rounding (relative to each output's
    # scale: the untrained heads' outputs are small), not bit for bit.
    for name in ("logits", "value", "grads"):
        scale = np.abs(off[name]).max()
        assert scale > 0, name
        np.testing.assert_allclose(on[name], off[name], rtol=0, atol=1e-4 * scale,
                                   err_msg=name)
