"""Self-play and training throughput of c4jax's trainer next to a pgx AlphaZero reference.

Two pipelines share the network (``c4jax.alphazero.network``: the same architecture and
variables), the mctx search settings and the learner's SGD step; they differ in
the environment, in what they store, and in how self-play runs the network
(c4jax folds BatchNorm into the convolutions, ``network.make_apply_fn``; the
reference runs the Flax module as written):

* **c4jax**: the two public pieces that ``trainer.Trainer.iteration`` composes,
  each jitted alone: ``run.selfplay_chunk`` (self-play of B games for T moves
  plus ``replay.add``: bitboard states in the buffer, 42-slot tails carried
  between chunks) and ``run.learn`` (K SGD steps: ``replay.sample`` rebuilds
  the observation planes, then the learner step; straight-line code on CPU, a
  ``lax.scan`` elsewhere). With ``--iteration`` the fused ``run.iteration`` is
  timed as well. With ``--stub-network`` the chunk is rebuilt the same way
  (``selfplay.make_selfplay`` + ``replay.add``) around a search of the stub.
* **reference**: in the style of pgx's AlphaZero example (``examples/alphazero``):
  ``pgx.make("connect_four")`` vmapped, the pgx state as the mctx embedding,
  ``recurrent_fn`` stepping pgx and reading ``state.observation`` and
  ``state.rewards`` of the player who moved (discount -1, 0 at the end), the
  same mctx policy with the same settings and the same masking of illegal moves
  at every depth. Self-play runs in ``lax.scan``; finished games restart from a
  fresh ``init`` through a select (cheaper than pgx's ``auto_reset``, which
  computes an ``init`` every step); each step stores the observation, search
  policy, reward and discount, and value targets come from a backward pass
  over the chunk, as in the example (positions of games still running at the
  end of a chunk get no target). The observations go into a ring buffer
  (``replay.add``), and SGD samples observation minibatches from it with the
  same learner step (``learner.make_sgd_step`` of the run's network and
  optimizer) in the same loop as ``run.learn``.

Timings exclude compilation, end with ``jax.block_until_ready`` and alternate
between the pipelines (the order reversed every other repeat), so that load
from other processes hits both alike; the median repeat counts. A third
timing, "network alone", runs a chunk's T x (sims + 1) forward passes and
nothing else; ``--stub-network`` swaps the network in self-play for a
near-free function of the observation, leaving env + tree + observation.

``--xla-paths as-shipped`` compares the two as their users run them: each
pipeline in a process of its own, c4jax with the XLA:CPU YNNPACK fusion its
command lines turn on (``c4jax.run.xla_flags``), the reference with XLA's default
code paths, as a pgx example runs. XLA reads its flags once per process, so
the parent starts one worker per pipeline and asks them in turn for one timed
call at a time (the idle one waits on its stdin): the same alternation, the
same medians and paired ratios.

Usage::

    JAX_PLATFORMS=cpu python -m bench.bench_train              # cpu preset: 3x32, 16 sims
    JAX_PLATFORMS=cpu python -m bench.bench_train --xla-paths as-shipped --repeats 9
    python -m bench.bench_train --blocks 1 --channels 8 --sims 2 --batch 8 --steps 2 \\
        --repeats 1 --out /tmp/smoke.json                      # smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from bench import bench_env

RESULTS_DIR = Path(__file__).resolve().parent / "results"


# --------------------------------------------------------------------------
# Harness


@dataclass
class Pipeline:
    """A self-play chunk and an SGD chunk, jitted, with the state they carry.

    Attributes:
        name: label in the table.
        play: jitted ``play(variables, key, carry) -> (carry, positions_with_targets)``;
            donates ``carry``; one call searches T moves of B games.
        learn: jitted ``learn(learner_state, buffer, key) -> (learner_state, loss)``;
            donates ``learner_state``; one call takes K SGD steps.
        carry: the self-play state and replay buffer, ``(games, buffer)``.
        learner_state: the ``learner.LearnerState`` SGD updates.
        node_bytes: bytes of one search-tree embedding (one game's env state).
    """

    name: str
    play: Callable
    learn: Callable
    carry: Any
    learner_state: Any
    node_bytes: int


def _state_bytes(state: Any) -> int:
    """Bytes of one element of a batched pytree (leading dimension B)."""
    return sum(x.dtype.itemsize * int(np.prod(x.shape[1:])) for x in jax.tree.leaves(state))


def make_config(args: argparse.Namespace):
    """The preset ``args.config`` with the benchmark's overrides, validated."""
    from c4jax.alphazero import config as config_lib

    config = config_lib.load(args.config)
    network = dataclasses.replace(
        config.network,
        num_blocks=args.blocks or config.network.num_blocks,
        channels=args.channels or config.network.channels,
    )
    search_config = dataclasses.replace(
        config.search,
        num_simulations=(config.search.num_simulations if args.sims is None else args.sims),
        algorithm=args.algorithm or config.search.algorithm,
    )
    t = config.train
    batch = args.batch or t.selfplay_batch
    steps = args.steps or t.selfplay_steps
    # --batch and --steps also set the minibatch and the SGD steps unless those
    # are given (the cpu preset has minibatch = B = 256 and K = T = 16).
    minibatch = args.minibatch or args.batch or t.minibatch_size
    train = dataclasses.replace(
        t,
        selfplay_batch=batch,
        selfplay_steps=steps,
        minibatch_size=minibatch,
        sgd_steps=args.sgd_steps or args.steps or t.sgd_steps,
        replay_capacity=max(t.replay_capacity, batch * steps, minibatch),
        min_replay_size=0,
    )
    config = dataclasses.replace(
        config, seed=args.seed, network=network, search=search_config, train=train
    )
    return config_lib.validate(config, jax.device_count())


def _copy(tree: Any) -> Any:
    """Fresh device buffers, so that donating one copy leaves the other intact."""
    return jax.tree.map(jnp.copy, tree)


def c4jax_pipeline(run, state, apply_fn: Callable) -> Pipeline:
    """c4jax's pieces as ``Trainer.iteration`` composes them: ``selfplay_chunk``, ``learn``.

    Args:
        run: a ``trainer.Trainer``.
        state: a ``trainer.TrainState`` from ``run.init`` (its arrays are donated).
        apply_fn: the network self-play evaluates: ``run.apply_fn``, or ``stub_apply``.
    """
    from c4jax import replay
    from c4jax.alphazero import search, selfplay

    if apply_fn is run.apply_fn:
        selfplay_chunk = run.selfplay_chunk
    else:  # --stub-network: the same composition around a search of the stub
        stub_selfplay = selfplay.make_selfplay(
            search.make_search(apply_fn, run.config.search),
            num_steps=run.config.train.selfplay_steps,
        )

        def selfplay_chunk(variables, key, games, buffer):
            games, positions, ready, metrics = stub_selfplay(variables, key, games)
            buffer = replay.add(buffer, positions, ready, shards=run.replay_shards)
            return games, buffer, metrics

    def play(variables, key, carry):
        games, buffer, metrics = selfplay_chunk(variables, key, *carry)
        return (games, buffer), metrics["positions_added"]

    def learn(learner_state, buffer, key):
        learner_state, metrics = run.learn(learner_state, buffer, key)
        return learner_state, metrics["loss"]

    return Pipeline(
        name="c4jax",
        play=jax.jit(play, donate_argnums=2),
        learn=jax.jit(learn, donate_argnums=0),
        carry=(state.selfplay, state.replay),
        learner_state=state.learner,
        node_bytes=_state_bytes(state.selfplay.games),
    )


@struct.dataclass
class ObsPositions:
    """Reference replay rows: what pgx's example trains on."""

    obs: jax.Array  # [M, H, W, 2] bool, pgx's observation
    policy: jax.Array  # [M, A] float32 search policy
    value: jax.Array  # [M] float32 value target


@struct.dataclass
class StepRecord:
    """One self-play step of all B games, as pgx's example stores it."""

    obs: jax.Array  # [B, H, W, 2] bool
    policy: jax.Array  # [B, A] float32 action_weights
    reward: jax.Array  # [B] float32 reward of the player who moved
    terminated: jax.Array  # [B] bool
    discount: jax.Array  # [B] float32: -1, or 0 at the end


def reference_pipeline(run, games_key: jax.Array, learner_state, apply_fn: Callable) -> Pipeline:
    """pgx ``connect_four`` self-play in the style of pgx's AlphaZero example.

    Args:
        run: a ``trainer.Trainer`` (for its search settings and learner step).
        games_key: PRNG key for the first games' random first players.
        learner_state: a ``learner.LearnerState`` (donated by ``learn``).
        apply_fn: the network self-play evaluates: the Flax module's inference
            apply (``run.network.apply(..., train=False)``), or ``stub_apply``.
    """
    import mctx
    import pgx

    from c4jax import replay
    from c4jax.alphazero import learner, search

    config = run.config
    s, t = config.search, config.train
    batch, num_steps = t.selfplay_batch, t.selfplay_steps
    game = pgx.make("connect_four")
    step = jax.vmap(game.step)  # key=None: Connect Four's step is deterministic

    def recurrent_fn(variables, rng_key, action, state):
        del rng_key
        mover = state.current_player
        state = step(state, action)
        logits, value = apply_fn(variables, state.observation)
        logits = search.mask_logits(logits, state.legal_action_mask)  # all True at the end
        reward = state.rewards[jnp.arange(state.rewards.shape[0]), mover]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -1.0)
        output = mctx.RecurrentFnOutput(
            reward=reward, discount=discount, prior_logits=logits, value=value
        )
        return output, state

    def policy(variables, key, state):
        legal = state.legal_action_mask
        logits, value = apply_fn(variables, state.observation)
        root = mctx.RootFnOutput(
            prior_logits=search.mask_logits(logits, legal), value=value, embedding=state
        )
        if s.algorithm == "gumbel":
            return mctx.gumbel_muzero_policy(
                params=variables,
                rng_key=key,
                root=root,
                recurrent_fn=recurrent_fn,
                num_simulations=s.num_simulations,
                invalid_actions=~legal,
                qtransform=search.gumbel_qtransform,
                max_num_considered_actions=s.max_num_considered_actions,
                gumbel_scale=s.gumbel_scale,
            )
        return mctx.muzero_policy(
            params=variables,
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=s.num_simulations,
            invalid_actions=~legal,
            qtransform=search.puct_qtransform,
            dirichlet_fraction=s.dirichlet_fraction,
            dirichlet_alpha=s.dirichlet_alpha,
            pb_c_init=s.pb_c_init,
        )

    def play(variables, key, carry):
        games, buffer = carry
        init_key, moves_key = jax.random.split(key)
        fresh = jax.vmap(game.init)(jax.random.split(init_key, batch))

        def move(state, move_key):
            out = policy(variables, move_key, state)
            mover = state.current_player
            after = step(state, out.action)
            record = StepRecord(
                obs=state.observation,
                policy=out.action_weights,
                reward=after.rewards[jnp.arange(batch), mover],
                terminated=after.terminated,
                discount=jnp.where(after.terminated, 0.0, -1.0),
            )
            state = jax.tree.map(
                lambda new, old: jnp.where(
                    jnp.reshape(after.terminated, (batch,) + (1,) * (old.ndim - 1)), new, old
                ),
                fresh,
                after,
            )
            return state, record

        games, data = jax.lax.scan(move, games, jax.random.split(moves_key, num_steps))
        # pgx's compute_loss_input: value targets backwards over the chunk, masked
        # where the game did not end inside it.
        ended = jnp.cumsum(data.terminated[::-1], axis=0)[::-1] >= 1

        def backward(value, x):
            reward, discount = x
            value = reward + discount * value
            return value, value

        _, value = jax.lax.scan(
            backward, jnp.zeros(batch), (data.reward, data.discount), reverse=True
        )
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
        positions = ObsPositions(obs=flat(data.obs), policy=flat(data.policy), value=flat(value))
        return (games, replay.add(buffer, positions, flat(ended))), ended.sum()

    def sample(buffer, key):
        index_key, mirror_key = jax.random.split(key)
        index = jax.random.randint(index_key, (t.minibatch_size,), 0, jnp.maximum(buffer.size, 1))
        picked = jax.tree.map(lambda x: x[index], buffer.data)
        obs = picked.obs.astype(jnp.float32)
        target = picked.policy
        if t.mirror_augment:  # the same augmentation as c4jax's sampler
            flip = jax.random.bernoulli(mirror_key, 0.5, (t.minibatch_size,))
            obs = jnp.where(flip[:, None, None, None], jnp.flip(obs, axis=-2), obs)
            target = jnp.where(flip[:, None], jnp.flip(target, axis=-1), target)
        return replay.Minibatch(obs=obs, policy=target, value=picked.value)

    sgd_step = learner.make_sgd_step(run.network, run.optimizer, t)
    unroll = jax.devices()[0].platform == "cpu"  # as Trainer.learn loops

    def learn(learner_state, buffer, key):
        def sgd(ls, sgd_key):
            return sgd_step(ls, sample(buffer, sgd_key))

        keys = jax.random.split(key, t.sgd_steps)
        if unroll:
            losses = []
            for sgd_key in keys:
                learner_state, metrics = sgd(learner_state, sgd_key)
                losses.append(metrics["loss"])
            return learner_state, jnp.mean(jnp.stack(losses))
        learner_state, metrics = jax.lax.scan(sgd, learner_state, keys)
        return learner_state, jnp.mean(metrics["loss"])

    games = jax.vmap(game.init)(jax.random.split(games_key, batch))
    capacity = t.replay_capacity
    buffer = replay.ReplayBuffer(
        data=ObsPositions(
            obs=jnp.zeros((capacity,) + games.observation.shape[1:], games.observation.dtype),
            policy=jnp.zeros((capacity, games.legal_action_mask.shape[-1]), jnp.float32),
            value=jnp.zeros((capacity,), jnp.float32),
        ),
        insert=jnp.int32(0),
        size=jnp.int32(0),
    )
    return Pipeline(
        name="reference",
        play=jax.jit(play, donate_argnums=2),
        learn=jax.jit(learn, donate_argnums=0),
        carry=(games, buffer),
        learner_state=learner_state,
        node_bytes=_state_bytes(games),
    )


def stub_apply(variables: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A stand-in for the network that costs next to nothing (``--stub-network``).

    It still reads every observation plane, so the observation is built, and its
    outputs depend on the position, so the search does real work.

    Args:
        variables: ignored.
        obs: [B, H, W, 2] planes, float32 or bool.

    Returns:
        ``(logits [B, A], value [B])`` float32.
    """
    del variables
    flat = obs.reshape(obs.shape[0], -1).astype(jnp.float32)  # [B, H * W * 2]
    logits = flat[:, 0:14:2] - flat[:, 1:14:2]  # the top row: stones in it, per column
    value = jnp.tanh(jnp.sum(flat * jnp.arange(flat.shape[1]), axis=-1) * 1e-3 - 0.5)
    return logits, value


def make_network_floor(run, apply_fn: Callable) -> Callable:
    """Jitted ``floor(variables, obs [B, H, W, 2]) -> value``: the network evaluations
    of one self-play chunk, T x (sims + 1) forward passes of batch B, and nothing else."""
    t = run.config.train
    count = t.selfplay_steps * (run.config.search.num_simulations + 1)

    def floor(variables, obs):
        def body(obs, _):
            _, value = apply_fn(variables, obs)
            # A data dependence the compiler cannot see through, at no real cost.
            obs = jnp.where(value[:, None, None, None] > 2.0, 1.0 - obs, obs)
            return obs, None

        obs, _ = jax.lax.scan(body, obs, None, length=count)
        return obs

    return jax.jit(floor)


def _timed(fn: Callable, *args) -> tuple[Any, float, float]:
    """``(fn(*args), wall seconds, process CPU seconds)``, waiting for the result."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _setup(config, stub_network: bool, only: str | None = None):
    """``(run, init_key, play_root, variables, pipelines)``: both pipelines, or ``only`` one.

    The same keys in every process, so that two workers start from the same network.
    """
    from c4jax.alphazero import trainer

    run = trainer.Trainer(config)
    init_key, ref_key, play_root = jax.random.split(jax.random.key(config.seed), 3)
    state = run.init(init_key)
    variables = _copy(run.variables(state))  # frozen network for self-play
    apply_fn = stub_apply if stub_network else run.apply_fn
    # The reference runs the Flax module as a pgx user would (convolution, then
    # BatchNorm); c4jax's apply_fn folds the BatchNorms into the convolutions.
    module_apply = stub_apply if stub_network else (
        lambda v, obs: run.network.apply(v, obs, train=False)
    )
    pipelines = []
    if only in (None, "c4jax"):
        pipelines.append(c4jax_pipeline(run, state, apply_fn))
    if only in (None, "reference"):
        pipelines.append(reference_pipeline(run, ref_key, _copy(state.learner), module_apply))
    return run, init_key, play_root, variables, pipelines


def _play(p: Pipeline, variables, key) -> tuple[float, float, int]:
    """One timed self-play chunk: ``(wall s, CPU s, positions given targets)``."""
    (p.carry, found), wall, cpu = _timed(p.play, variables, key, p.carry)
    return wall, cpu, int(found)


def _learn(p: Pipeline, key) -> tuple[float, float]:
    """One timed SGD call: ``(wall s, CPU s)``."""
    (p.learner_state, _), wall, cpu = _timed(p.learn, p.learner_state, p.carry[1], key)
    return wall, cpu


def _warm_up(p: Pipeline, variables, play_root) -> dict[str, float]:
    """Compiles, then one more chunk so that the buffer holds data; the compile times."""
    compile_s = {f"{p.name} self-play": _play(p, variables, jax.random.fold_in(play_root, 0))[0]}
    _play(p, variables, jax.random.fold_in(play_root, 1))
    compile_s[f"{p.name} sgd"] = _learn(p, jax.random.fold_in(play_root, 2))[0]
    return compile_s


def benchmark(
    config, repeats: int, with_iteration: bool, stub_network: bool = False
) -> dict[str, Any]:
    """Times both pipelines (and c4jax's fused iteration) ``repeats`` times, alternating.

    Args:
        config: the run configuration (network, search, batch and steps).
        repeats: timed calls of each part.
        with_iteration: also time c4jax's fused ``run.iteration``.
        stub_network: self-play evaluates ``stub_apply`` instead of the network
            (SGD still trains the network).

    Returns:
        {"times": {label: [wall seconds per call]}, "cpu_times": {label: [process
        CPU seconds per call]}, "positions_with_targets": {name: [rows per chunk]},
        "node_bytes": {name: bytes}, "compile_s": {label: seconds}}.
    """
    from c4jax.alphazero import trainer

    run, init_key, play_root, variables, pipelines = _setup(config, stub_network)
    apply_fn = stub_apply if stub_network else run.apply_fn
    floor = make_network_floor(run, apply_fn)
    floor_obs = jnp.zeros((config.train.selfplay_batch, 6, 7, 2), jnp.float32)
    iteration = lambda s, k: run.iteration(s, k)[0]  # noqa: E731

    compile_s: dict[str, float] = {}
    targets: dict[str, list[int]] = {p.name: [] for p in pipelines}
    times: dict[str, list[float]] = {}
    cpu_times: dict[str, list[float]] = {}

    def play(p: Pipeline, key) -> tuple[float, float]:
        wall, cpu, found = _play(p, variables, key)
        targets[p.name].append(found)
        return wall, cpu

    def record(label: str, took: tuple[float, float]) -> None:
        times.setdefault(label, []).append(took[0])
        cpu_times.setdefault(label, []).append(took[1])

    for p in pipelines:
        compile_s.update(_warm_up(p, variables, play_root))
    compile_s["network floor"] = _timed(floor, variables, floor_obs)[1]
    iteration_state = None
    if with_iteration:
        iteration_state, compile_s["c4jax iteration"], _ = _timed(
            iteration, run.init(init_key), trainer.iteration_key(0, 0)
        )

    for r in range(repeats):
        key = jax.random.fold_in(play_root, 100 + r)
        order = pipelines if r % 2 == 0 else pipelines[::-1]
        for p in order:
            record(f"{p.name} self-play", play(p, key))
        for p in order:
            record(f"{p.name} sgd", _learn(p, key))
        if iteration_state is not None:
            iteration_state, *took = _timed(
                iteration, iteration_state, trainer.iteration_key(0, r + 1)
            )
            record("c4jax iteration", took)
        record("network floor", _timed(floor, variables, floor_obs)[1:])
    return {
        "times": times,
        "cpu_times": cpu_times,
        "positions_with_targets": targets,
        "node_bytes": {p.name: p.node_bytes for p in pipelines},
        "compile_s": compile_s,
    }


# --------------------------------------------------------------------------
# One process per pipeline (--xla-paths as-shipped)

_MARK = "@bench_train "  # prefixes a worker's result lines (anything else on stdout is not)


def pipeline_env(name: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """A worker's environment: XLA's code paths as each pipeline's users run them.

    c4jax: the YNNPACK fusion its command lines add (``c4jax.run.xla_flags``), where this
    jaxlib defines the flag; the reference: XLA's defaults (any YNNPACK setting removed).
    Other XLA flags are kept.
    """
    from c4jax.run import xla_flags

    env = dict(os.environ if environ is None else environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if xla_flags.YNN_FLAG_NAME not in f]
    if name == "c4jax" and xla_flags.jaxlib_knows(xla_flags.YNN_FLAG_NAME):
        flags.append(xla_flags.YNN_FLAG)
    env["XLA_FLAGS"] = " ".join(flags)
    env[xla_flags.OPT_OUT] = "1" if name == "c4jax" else "0"
    return env


def _say(record: dict[str, Any]) -> None:
    print(_MARK + json.dumps(record), flush=True)


def serve_worker(config, name: str, stub_network: bool) -> None:
    """Times one pipeline on request: compiles, says so, then answers ``play R`` and
    ``learn R`` lines on stdin with one result line each, until stdin closes."""
    _, _, play_root, variables, (p,) = _setup(config, stub_network, only=name)
    compile_s = _warm_up(p, variables, play_root)
    _say({"compile_s": compile_s, "node_bytes": p.node_bytes,
          "xla_flags": os.environ.get("XLA_FLAGS", "")})
    for line in sys.stdin:
        command, repeat = line.split()
        key = jax.random.fold_in(play_root, 100 + int(repeat))
        if command == "play":
            wall, cpu, found = _play(p, variables, key)
            _say({"wall": wall, "cpu": cpu, "found": found})
        else:
            wall, cpu = _learn(p, key)
            _say({"wall": wall, "cpu": cpu})


class _Worker:
    """A ``serve_worker`` process for one pipeline."""

    def __init__(self, name: str, argv: list[str]):
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_train", *argv, "--worker", name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=pipeline_env(name), cwd=Path(__file__).resolve().parent.parent,
        )

    def read(self) -> dict[str, Any]:
        for line in self.proc.stdout:
            if line.startswith(_MARK):
                return json.loads(line[len(_MARK):])
        raise RuntimeError(f"the {self.name} worker stopped (exit status {self.proc.wait()})")

    def ask(self, command: str, repeat: int) -> dict[str, Any]:
        self.proc.stdin.write(f"{command} {repeat}\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def benchmark_processes(repeats: int, argv: list[str]) -> dict[str, Any]:
    """``benchmark``'s measurements with each pipeline in a process of its own.

    ``argv``: the benchmark's own arguments, handed to the workers (which build
    the same configuration from them). The workers compile side by side; then
    every timed call runs alone, alternating as in ``benchmark``.
    """
    workers = [_Worker("c4jax", argv), _Worker("reference", argv)]
    try:
        ready = {w.name: w.read() for w in workers}
        times: dict[str, list[float]] = {}
        cpu_times: dict[str, list[float]] = {}
        targets: dict[str, list[int]] = {w.name: [] for w in workers}

        def record(label: str, took: dict[str, Any]) -> None:
            times.setdefault(label, []).append(took["wall"])
            cpu_times.setdefault(label, []).append(took["cpu"])

        for r in range(repeats):
            order = workers if r % 2 == 0 else workers[::-1]
            for w in order:
                took = w.ask("play", r)
                targets[w.name].append(took["found"])
                record(f"{w.name} self-play", took)
            for w in order:
                record(f"{w.name} sgd", w.ask("learn", r))
    finally:
        for w in workers:
            w.close()
    return {
        "times": times,
        "cpu_times": cpu_times,
        "positions_with_targets": targets,
        "node_bytes": {name: r["node_bytes"] for name, r in ready.items()},
        "compile_s": {k: v for r in ready.values() for k, v in r["compile_s"].items()},
        "xla_flags": {name: r["xla_flags"] for name, r in ready.items()},
    }


# --------------------------------------------------------------------------
# Reporting


def device_info() -> dict[str, Any]:
    """Where the numbers were taken."""
    return bench_env.device_info(("pgx", "mctx", "flax"))


def summarize(config, measured: dict[str, Any]) -> dict[str, Any]:
    """Throughputs from median times, and the c4jax / reference ratios."""
    t = config.train
    positions = t.selfplay_batch * t.selfplay_steps  # searched positions per chunk
    samples = t.sgd_steps * t.minibatch_size  # training samples per SGD call
    median = {label: statistics.median(v) for label, v in measured["times"].items()}
    rows: dict[str, dict[str, float | None]] = {}
    for name in ("c4jax", "reference"):
        play_s, sgd_s = median[f"{name} self-play"], median[f"{name} sgd"]
        found = measured["positions_with_targets"][name]
        rows[name] = {
            "selfplay_s": play_s,
            "sgd_s": sgd_s,
            "selfplay_positions_per_s": positions / play_s,
            "train_samples_per_s": samples / sgd_s,
            "iteration_s": play_s + sgd_s,
            "positions_with_targets_per_chunk": statistics.mean(found) if found else None,
            "node_bytes": measured["node_bytes"][name],
        }
    ratio = {
        "selfplay_positions_per_s": rows["c4jax"]["selfplay_positions_per_s"]
        / rows["reference"]["selfplay_positions_per_s"],
        "train_samples_per_s": rows["c4jax"]["train_samples_per_s"]
        / rows["reference"]["train_samples_per_s"],
        "iteration": rows["reference"]["iteration_s"] / rows["c4jax"]["iteration_s"],
    }
    # Each repeat times the two pipelines back to back: the median of the per-repeat
    # ratios is less exposed to load that drifts between repeats.
    paired = {}
    for kind in ("times", "cpu_times"):
        for part, label in (("selfplay", "self-play"), ("sgd", "sgd")):
            ours = measured[kind][f"c4jax {label}"]
            theirs = measured[kind][f"reference {label}"]
            per_repeat = [b / a for a, b in zip(ours, theirs, strict=True)]
            paired[f"{part}_{'wall' if kind == 'times' else 'cpu'}"] = statistics.median(per_repeat)
    ratio["paired_median"] = paired
    summary: dict[str, Any] = {"pipelines": rows, "ratio_c4jax_over_reference": ratio}
    if "network floor" in median:
        floor_s = median["network floor"]
        summary["network_floor"] = {
            "seconds": floor_s,
            "positions_per_s": positions / floor_s,
            "forward_passes": t.selfplay_steps * (config.search.num_simulations + 1),
        }
    if "c4jax iteration" in median:
        summary["c4jax_fused_iteration_s"] = median["c4jax iteration"]
    return summary


def print_table(config, summary: dict[str, Any], repeats: int, stub: bool = False) -> None:
    """Prints the throughput table and the ratios."""
    n, s, t = config.network, config.search, config.train
    played = "stub network in self-play, " if stub else ""
    print(
        f"network {n.num_blocks}x{n.channels}, {played}{s.algorithm} {s.num_simulations} sims, "
        f"B={t.selfplay_batch} games x T={t.selfplay_steps} moves per chunk, "
        f"{t.sgd_steps} SGD steps x minibatch {t.minibatch_size}; median of {repeats}"
    )
    header = (
        f"{'pipeline':<12} {'self-play pos/s':>16} {'train samples/s':>16} "
        f"{'chunk s':>8} {'sgd s':>7} {'targets/chunk':>14} {'node B':>7}"
    )
    print(header)
    rows = summary["pipelines"]
    for name, row in rows.items():
        found = row["positions_with_targets_per_chunk"]
        print(
            f"{name:<12} {row['selfplay_positions_per_s']:16.1f} "
            f"{row['train_samples_per_s']:16.1f} {row['selfplay_s']:8.3f} {row['sgd_s']:7.3f} "
            f"{'-' if found is None else f'{found:.0f}':>14} {row['node_bytes']:7d}"
        )
    ratio = summary["ratio_c4jax_over_reference"]
    paired = ratio["paired_median"]
    print(
        f"{'c4jax/ref':<12} {ratio['selfplay_positions_per_s']:16.2f} "
        f"{ratio['train_samples_per_s']:16.2f}   (whole iteration: {ratio['iteration']:.2f}x)"
    )
    print(
        f"{'  paired':<12} {paired['selfplay_wall']:16.2f} {paired['sgd_wall']:16.2f}"
        f"   (median of per-repeat ratios; CPU time: {paired['selfplay_cpu']:.2f}, "
        f"{paired['sgd_cpu']:.2f})"
    )
    if "network_floor" in summary:
        floor = summary["network_floor"]
        print(
            f"network alone ({floor['forward_passes']} forward passes of B per chunk): "
            f"{floor['positions_per_s']:.1f} pos/s, {floor['seconds']:.3f} s"
        )
    if "c4jax_fused_iteration_s" in summary:
        print(
            f"c4jax fused run.iteration: {summary['c4jax_fused_iteration_s']:.3f} s "
            f"(pieces: {rows['c4jax']['iteration_s']:.3f} s)"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="cpu", help="preset name or JSON path (default cpu)")
    parser.add_argument("--blocks", type=int, default=None, help="residual blocks (preset: 3)")
    parser.add_argument("--channels", type=int, default=None, help="channels (preset: 32)")
    parser.add_argument("--sims", type=int, default=None, help="simulations per move (16)")
    parser.add_argument(
        "--algorithm", choices=("gumbel", "puct"), default=None, help="search (gumbel)"
    )
    parser.add_argument(
        "--batch", type=int, default=None, help="games B in parallel, and the minibatch (256)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="moves T per chunk, and SGD steps per call (16)"
    )
    parser.add_argument(
        "--minibatch", type=int, default=None, help="SGD minibatch (default: --batch, else 256)"
    )
    parser.add_argument(
        "--sgd-steps",
        type=int,
        default=None,
        help="SGD steps per call (default: --steps, else 16; on CPU 1 step is ~18x slower "
        "per step: a one-trip while loop)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed calls; the median counts")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed")
    parser.add_argument(
        "--stub-network",
        action="store_true",
        help="self-play with a near-free stand-in for the network: env + tree + observation",
    )
    parser.add_argument(
        "--iteration",
        action="store_true",
        help="also time c4jax's fused run.iteration (one more large compile)",
    )
    parser.add_argument(
        "--xla-paths",
        choices=("same", "as-shipped"),
        default="same",
        help="same: both pipelines in this process, on its XLA flags; as-shipped: one "
        "process each, c4jax with the YNNPACK fusion its command lines turn on, the "
        "reference with XLA's default CPU code paths (as a pgx example runs)",
    )
    parser.add_argument("--worker", choices=("c4jax", "reference"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results file (default bench/results/train_<platform>[_as_shipped].json)",
    )
    args = parser.parse_args(argv)
    if args.xla_paths == "as-shipped" and (args.iteration or args.stub_network):
        parser.error("--xla-paths as-shipped times the two pipelines' self-play and SGD; "
                     "drop --iteration and --stub-network")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark, prints a table and writes the JSON results."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    config = make_config(args)
    if args.worker:
        serve_worker(config, args.worker, args.stub_network)
        return {}
    info = device_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    if args.xla_paths == "as-shipped":
        measured = benchmark_processes(args.repeats, argv)
        print(f"XLA_FLAGS per pipeline: {measured['xla_flags']}")
    else:
        measured = benchmark(config, args.repeats, args.iteration, args.stub_network)
    load_end = os.getloadavg()
    summary = summarize(config, measured)
    print(
        f"device: {info['device_kind']} ({info['platform']}, {info['cpu_count']} CPUs), "
        f"jax {info['jax_version']}, pgx {info['pgx_version']}, mctx {info['mctx_version']}; "
        f"load average {load_start[0]:.2f} -> {load_end[0]:.2f}"
    )
    print_table(config, summary, args.repeats, args.stub_network)

    n, s, t = config.network, config.search, config.train
    result = {
        "device": info,
        "load_average": {"start": list(load_start), "end": list(load_end)},
        "command": "python -m bench.bench_train " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": time.perf_counter() - started,
        "settings": {
            "preset": args.config,
            "network": dataclasses.asdict(n),
            "search": dataclasses.asdict(s),
            "selfplay_batch": t.selfplay_batch,
            "selfplay_steps": t.selfplay_steps,
            "sgd_steps": t.sgd_steps,
            "minibatch_size": t.minibatch_size,
            "replay_capacity": t.replay_capacity,
            "mirror_augment": t.mirror_augment,
            "sgd_scan_unroll": jax.devices()[0].platform == "cpu",
            "repeats": args.repeats,
            "stub_network": args.stub_network,
            "xla_paths": args.xla_paths,
            "xla_flags": measured.get("xla_flags", os.environ.get("XLA_FLAGS", "")),
        },
        "definitions": {
            "selfplay_positions_per_s": "B x T searched positions / median self-play chunk "
            "time (search, env steps, restarts, value targets, replay add)",
            "train_samples_per_s": "sgd_steps x minibatch / median time of one call of "
            "sgd_steps SGD steps (sampling + observation + learner step)",
            "positions_with_targets_per_chunk": "rows added to the replay buffer per chunk",
            "node_bytes": "bytes of one game's env state, stored at every search-tree node",
            "network_floor": "T x (sims + 1) forward passes of batch B alone",
            "ratio_c4jax_over_reference.iteration": "reference (chunk + sgd) time / c4jax's",
            "ratio_c4jax_over_reference.paired_median": "median over repeats of reference "
            "time / c4jax time of the same repeat (wall and process CPU time)",
        },
        "compile_s": measured["compile_s"],
        "times_s": measured["times"],
        "cpu_times_s": measured["cpu_times"],
        "summary": summary,
    }
    suffix = "_as_shipped" if args.xla_paths == "as-shipped" else ""
    out = args.out or RESULTS_DIR / f"train_{info['platform']}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
