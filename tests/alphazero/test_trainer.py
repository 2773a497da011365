"""The trainer: SGD steps in one loop (a program that does not grow with them),
programs shared between runs of one process, and the sharded step on two devices
(SGD steps that move no replay data between devices, checkpoints that keep the
buffer in slot order).

Two forced CPU devices need a fresh process (``XLA_FLAGS`` is read when JAX
starts), so those checks run in a child that prints what it measured as JSON.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xla_env

from c4jax import env, replay
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import learner, trainer

ROOT = Path(__file__).resolve().parents[2]


def _tiny(**train):
    cfg = config_lib.load("tiny")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **train))


def test_the_sgd_steps_are_one_loop_whose_program_does_not_grow_with_them():
    """The K SGD steps run in a lax.scan: the step is traced once, and the lowered
    program for 16 steps is the size of the one for 2 (written out step by step it
    was 8x: minutes to compile and ~30 s to load on a 2-core CPU)."""
    sizes = {}
    for k in (2, 16):
        run = trainer.Trainer(_tiny(sgd_steps=k))
        traced, step = [], run._sgd_step

        def counted(*args, step=step, traced=traced):
            traced.append(1)
            return step(*args)

        run._sgd_step = counted
        lowered = run.iteration.trace(run.abstract_state(), jax.random.key(0)).lower()
        assert traced == [1]
        sizes[k] = len(lowered.as_text())
    assert sizes[16] < 1.05 * sizes[2], sizes


def test_on_the_cpu_the_network_takes_loop_friendly_convolution_gradients():
    run = trainer.Trainer(_tiny())
    assert run.mesh.devices.flat[0].platform == "cpu"
    assert run.network.loop_grads  # c4jax.alphazero.conv: fast inside the scan


def test_runs_of_one_process_share_the_programs_that_are_the_same():
    cfg = _tiny()
    first = trainer.shared_trainer(cfg)
    other_seed = dataclasses.replace(
        cfg, seed=7, checkpoint_every=3, keep_checkpoints=5,
        eval=dataclasses.replace(cfg.eval, games=4, every=1, num_simulations=8),
    )
    second = trainer.shared_trainer(other_seed)
    assert second.iteration.jitted is first.iteration.jitted and second.init is first.init
    assert second.config == other_seed and first.config == cfg  # each keeps its own
    # The run's length is an argument of the iteration, not a constant of it: more
    # iterations, or the count a time budget chooses, reuse the program.
    longer = trainer.shared_trainer(_tiny(num_iterations=9, time_budget="2h"))
    assert longer.iteration.jitted is first.iteration.jitted
    assert (longer.iteration.num_iterations, first.iteration.num_iterations) == (9, 4)
    for different in (
        _tiny(sgd_steps=3),  # a program of its own
        dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, gating=0.55)),
    ):
        assert trainer.shared_trainer(different).iteration.jitted is not first.iteration.jitted


def test_one_compiled_iteration_serves_every_run_length():
    """The learning-rate schedule spans the length the iteration is given, and a
    second length runs the same compiled program."""
    cfg = _tiny(lr_schedule="cosine")
    run = trainer.Trainer(cfg)
    sgd = cfg.train.sgd_steps
    rates = {}
    for length in (4, 400):
        iteration = trainer.CountedIteration(run.iteration.jitted, length)
        state = run.init(jax.random.key(0))
        for step in range(3):
            state, metrics = iteration(state, trainer.iteration_key(0, step))
        rates[length] = float(metrics["learning_rate"])  # after 2 iterations of sgd steps
        expected = learner.make_schedule(cfg.train, length * sgd)(2 * sgd)
        np.testing.assert_allclose(rates[length], expected, rtol=1e-5)
    # Half-way down the cosine (to 10%) against near the peak.
    assert rates[4] == pytest.approx(0.55 * cfg.train.learning_rate, rel=1e-4)
    assert rates[400] > 0.99 * cfg.train.learning_rate
    assert run.iteration.jitted._cache_size() == 1


def test_the_learning_rate_shown_is_the_one_the_sgd_steps_use():
    """Iterations that wait for min_replay_size do not step the optimizer, so its
    schedule falls behind the iteration count; the metric follows the optimizer."""
    cfg = _tiny(lr_schedule="cosine", min_replay_size=300)  # more than a chunk's 128
    run = trainer.Trainer(cfg)
    iteration = trainer.CountedIteration(run.iteration.jitted, 6)
    state = run.init(jax.random.key(0))
    learned = []
    for step in range(6):
        state, metrics = iteration(state, trainer.iteration_key(0, step))
        learned.append(bool(metrics["learned"]))
        taken = learner.schedule_count(state.learner.opt_state)
        assert int(taken) == cfg.train.sgd_steps * sum(learned)
    assert learned[0] is False and learned[-1] is True
    total = 6 * cfg.train.sgd_steps
    before_last = cfg.train.sgd_steps * sum(learned[:-1])
    expected = learner.make_schedule(cfg.train, total)(before_last)
    np.testing.assert_allclose(float(metrics["learning_rate"]), expected, rtol=1e-5)
    assert float(metrics["learning_rate"]) > float(learner.make_schedule(cfg.train, total)(
        5 * cfg.train.sgd_steps))  # what state.step * sgd_steps gave


def _filled(buffer, old: int, new: int):
    """``buffer`` after ``old`` empty-board positions valued 0, then ``new`` valued 1."""
    for count, value in ((old, 0.0), (new, 1.0)):
        positions = replay.Positions(
            state=env.init_batch(count), policy=jnp.full((count, env.NUM_ACTIONS), 1 / 7),
            value=jnp.full((count,), value))
        buffer = replay.add(buffer, positions, jnp.ones(count, bool))
    return buffer


def test_a_replay_window_trains_on_the_newest_positions_only():
    """1000 positions valued 0, then the newest 64 valued 1: the untrained network
    (values near 0) meets mostly the 0s in the whole buffer and only the 1s in a
    window of 64, as its value loss shows."""
    run = trainer.Trainer(_tiny(sgd_steps=2))
    state = run.init(jax.random.key(0))
    buffer = _filled(state.replay, 1000, 64)
    losses = {}
    for window in (None, jnp.int32(64)):
        _, metrics = run.learn(state.learner, buffer, jax.random.key(1), window=window)
        losses[window is None] = float(metrics["value_loss"])
    assert losses[True] < 0.3 and losses[False] > 0.6, losses


def test_the_iteration_widens_the_window_with_the_positions_searched():
    """Iteration s + 1 (s done) has searched (s + 1) * B * T positions; the window
    the SGD steps get is ``replay.window_size`` of that."""
    run = trainer.Trainer(_tiny(replay_window=100, replay_window_power=0.5))
    seen = []

    def spy(learner_state, buffer, key, num_iterations, window):
        seen.append(window)
        return learner_state, {} if window is None else {"window": window.astype(jnp.float32)}

    run.learn = spy
    state = run.init(jax.random.key(0))
    state = state.replace(step=jnp.int32(5), replay=_filled(state.replay, 10, 10))
    _, metrics = jax.jit(run._iteration)(state, jax.random.key(0), jnp.int32(9))
    chunk = 16 * 8  # the tiny preset's B * T
    assert int(metrics["window"]) == int(replay.window_size(6 * chunk, 100, 0.5)) == 277
    # Past 2**31 positions searched (int32 would wrap around to a window of 1).
    late = state.replace(step=jnp.int32(2**24))
    _, metrics = jax.jit(run._iteration)(late, jax.random.key(0), jnp.int32(2**24 + 9))
    assert int(metrics["window"]) == pytest.approx(100 * ((2**24 + 1) * chunk / 100) ** 0.5,
                                                   rel=1e-4)
    off = trainer.Trainer(_tiny())
    off.learn = spy
    jax.jit(off._iteration)(state, jax.random.key(0), jnp.int32(9))
    assert seen[-1] is None  # off: the whole buffer, the sampling as before


# Sizes chosen to be recognisable in the HLO: a minibatch of 48 rows, a
# buffer of 3000 (1500 per device); self-play works on 16 games.
_CHILD = """
import dataclasses, json, re
import jax
import numpy as np
from c4jax.alphazero import config as config_lib, trainer

cfg = config_lib.load("tiny")
cfg = dataclasses.replace(cfg, train=dataclasses.replace(
    cfg.train, minibatch_size=48, replay_capacity=3000))
run = trainer.Trainer(cfg)
abstract = run.abstract_state()

def collectives(compiled):  # a shape, or a tuple of them (combined collectives in loops)
    found = re.findall(
        r"= (\\([^)]*\\)|\\S+) (all-gather|all-to-all|collective-permute|all-reduce|reduce-scatter)"
        r"(?:-start)?\\(", compiled.as_text())
    return [[kind, shape] for shape, kind in found]

learn = jax.jit(run.learn, in_shardings=(
    run.shardings.learner, run.shardings.replay, jax.sharding.NamedSharding(run.mesh, jax.P())))
learn_ops = collectives(learn.lower(abstract.learner, abstract.replay, jax.random.key(0)).compile())
iteration_ops = collectives(run.iteration.lower(abstract, jax.random.key(0)).compile())

state = run.init(jax.random.key(0))
for step in range(2):
    state, _ = run.iteration(state, jax.random.key(step))
size = int(state.replay.size)
stored = np.asarray(state.replay.data.policy).sum(-1)
ordered = run.to_checkpoint(state)
in_order = np.asarray(ordered.replay.data.policy).sum(-1)
back = run.from_checkpoint(ordered)
same = all(np.array_equal(a, b) for a, b in zip(
    jax.tree.leaves(jax.device_get(back)), jax.tree.leaves(jax.device_get(state))))
# A replay window on two devices: 1000 positions valued 0, then the newest 64 valued 1.
from c4jax import env, replay
import jax.numpy as jnp
buffer = replay.init(cfg.train.replay_capacity)
for count, value in ((1000, 0.0), (64, 1.0)):
    buffer = replay.add(buffer, replay.Positions(
        state=env.init_batch(count), policy=jnp.full((count, 7), 1 / 7),
        value=jnp.full((count,), value)), jnp.ones(count, bool), shards=2)
buffer = jax.device_put(buffer, run.shardings.replay)
windowed = jax.jit(run.learn, in_shardings=(
    run.shardings.learner, run.shardings.replay, jax.sharding.NamedSharding(run.mesh, jax.P()),
    None, None))
window_args = (state.learner, buffer, jax.random.key(1), 4, jnp.int32(64))
window_ops = collectives(windowed.lower(*window_args).compile())
window_loss = float(windowed(*window_args)[1]["value_loss"])
print(json.dumps({
    "window_learn": window_ops, "window_loss": window_loss,
    "devices": jax.device_count(), "shards": run.replay_shards,
    "learn": learn_ops, "iteration": iteration_ops, "size": size,
    "stored_prefix_filled": bool(np.allclose(stored[:size], 1)),
    "ordered_prefix_filled": bool(np.allclose(in_order[:size], 1) and (in_order[size:] == 0).all()),
    "round_trip": same,
    "ready": [bool(run.ready_to_learn(jnp.int32(n))) for n in (0, 1, 2)],
}))
"""


@pytest.fixture(scope="module")
def two_devices():
    env = {
        **os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
        "XLA_FLAGS": xla_env.with_devices(2),
    }
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    assert measured["devices"] == 2 and measured["shards"] == 2
    return measured


@pytest.mark.slow
def test_sgd_steps_only_all_reduce(two_devices):
    """The compiled K SGD steps: each device samples its own rows; the only
    collectives are all-reduces (gradients, batch statistics, metrics)."""
    kinds = {kind for kind, _ in two_devices["learn"]}
    assert kinds == {"all-reduce"}, two_devices["learn"]


@pytest.mark.slow
def test_each_device_draws_its_share_of_the_replay_window(two_devices):
    """With a window of the newest 64 positions (valued 1) over 1000 older ones
    (valued 0), both devices draw only the new ones, still without moving rows."""
    assert two_devices["window_loss"] > 0.6
    assert {kind for kind, _ in two_devices["window_learn"]} == {"all-reduce"}


@pytest.mark.slow
def test_the_iteration_moves_no_buffer_or_minibatch_rows(two_devices):
    """In the whole iteration, what is gathered comes from self-play (the new
    positions, once per iteration), never rows of the buffer (3000, 1500 per
    device) or of a minibatch (48)."""
    gathered = [shape for kind, shape in two_devices["iteration"] if kind != "all-reduce"]
    for shape in gathered:  # every array of a tuple-shaped collective
        for dims in re.findall(r"\[([\d,]*)\]", shape):
            assert not {"3000", "1500", "48", "24"} & set(dims.split(",")), gathered


@pytest.mark.slow
def test_checkpoints_keep_the_buffer_in_slot_order(two_devices):
    """Two devices deal the slots out to both halves of the buffer; the
    checkpoint form has slots 0..size-1 first (as one device stores them), so a
    run can resume on another device count, and it converts back exactly."""
    assert 0 < two_devices["size"] < 3000
    assert not two_devices["stored_prefix_filled"]  # half of them lie in the second half
    assert two_devices["ordered_prefix_filled"]
    assert two_devices["round_trip"]


@pytest.mark.slow
def test_learning_waits_for_a_position_in_every_shard(two_devices):
    """With one position in two shards, the empty shard's device would draw
    rows never written: no SGD step until each shard holds one."""
    assert two_devices["ready"] == [False, False, True]


# Policy surprise weights and starts from surprising positions, on two devices.
_SURPRISE_CHILD = """
import dataclasses, json
import jax
import numpy as np
from c4jax.alphazero import config as config_lib, trainer

cfg = config_lib.load("tiny")
cfg = dataclasses.replace(cfg, train=dataclasses.replace(
    cfg.train, minibatch_size=48, replay_capacity=3000, random_opening_moves=4,
    policy_surprise_weight=0.5, surprise_starts=0.5, surprise_pool=64))
run = trainer.Trainer(cfg)
state = run.init(jax.random.key(0))
for step in range(2):
    state, metrics = run.iteration(state, jax.random.key(step))
size = int(state.replay.size)
weights = np.asarray(run.to_checkpoint(state).replay.data.weight)[:size]
print(json.dumps({
    "devices": jax.device_count(), "size": size,
    "weight_mean": float(weights.mean()), "weight_max": float(weights.max()),
    "pool_size": int(state.selfplay.pool.size),
    "pool_start_fraction": float(metrics["pool_start_fraction"]),
}))
"""


@pytest.mark.slow
def test_surprise_weights_and_starts_run_on_two_devices():
    """Each chunk's loss weights average 1 over both devices' games; the start pool
    (replicated) fills from the first chunk and feeds the second chunk's games."""
    env = {
        **os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT),
        "XLA_FLAGS": xla_env.with_devices(2),
    }
    out = subprocess.run(
        [sys.executable, "-c", _SURPRISE_CHILD], capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    assert measured["devices"] == 2 and measured["size"] > 0
    assert abs(measured["weight_mean"] - 1.0) < 1e-3 and measured["weight_max"] > 1.0
    assert measured["pool_size"] > 0 and measured["pool_start_fraction"] > 0
