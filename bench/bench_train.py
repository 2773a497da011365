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
  the observation planes, then the learner step, in one ``lax.scan``). With
  ``--iteration`` the fused ``run.iteration`` is timed as well. With
  ``--stub-network`` the chunk is rebuilt the same way
  (``Trainer.make_selfplay`` + ``replay.add``) around a search of the stub;
  the fused iteration always plays with the real network, so the two flags
  are refused together.
* **reference** (``bench.reference_pgx``): in the style of pgx's AlphaZero
  example, ``pgx.make("connect_four")`` vmapped with its state as the mctx
  embedding, self-play in ``lax.scan`` storing observations, value targets
  from a backward pass over the chunk (games unfinished at its end get none),
  an observation ring buffer and the same learner step.

This module is the command line and c4jax's side; ``bench.harness`` times the
two alike: timings exclude compilation, end with ``jax.block_until_ready``
and alternate between the pipelines (the order reversed every other repeat),
so that load from other processes hits both alike; the median repeat counts.
A third timing, "network alone", runs a chunk's T x (sims + 1) forward passes
and nothing else; ``--stub-network`` swaps the network in self-play for a
near-free function of the observation (``reference_pgx.stub_apply``), leaving
env + tree + observation.

``--xla-paths as-shipped`` compares the two as their users run them: each
pipeline in a process of its own, c4jax with the XLA:CPU YNNPACK fusion its
command lines turn on (``c4jax.run.xla_flags``), the reference with XLA's default
code paths, as a pgx example runs. XLA reads its flags once per process, so
the parent starts one worker per pipeline and asks them in turn for one timed
call at a time (the idle one waits on its stdin): the same alternation, the
same medians and paired ratios.

Usage::

    JAX_PLATFORMS=cpu python -m bench.bench_train              # cpu preset: 3x32, 4 sims
    JAX_PLATFORMS=cpu python -m bench.bench_train --xla-paths as-shipped --repeats 9
    python -m bench.bench_train --blocks 1 --channels 8 --sims 2 --batch 8 --steps 2 \\
        --repeats 1 --out /tmp/smoke.json                      # smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from bench import bench_env, harness
from bench.reference_pgx import reference_pipeline, stub_apply

RESULTS_DIR = Path(__file__).resolve().parent / "results"


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
    # are given (the cpu preset has B = 256, T = 16, minibatch 128 and K = 64).
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


def c4jax_pipeline(run, state, apply_fn: Callable) -> harness.Pipeline:
    """c4jax's pieces as ``Trainer.iteration`` composes them: ``selfplay_chunk``, ``learn``.

    Args:
        run: a ``trainer.Trainer``.
        state: a ``trainer.TrainState`` from ``run.init`` (its arrays are donated).
        apply_fn: the network self-play evaluates: ``run.apply_fn``, or ``stub_apply``.
    """
    from c4jax import replay

    if apply_fn is run.apply_fn:
        selfplay_chunk = run.selfplay_chunk
    else:  # --stub-network: the run's own self-play (its settings) around the stub
        stub_selfplay = run.make_selfplay(apply_fn)

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

    return harness.Pipeline(
        name="c4jax",
        play=jax.jit(play, donate_argnums=2),
        learn=jax.jit(learn, donate_argnums=0),
        carry=(state.selfplay, state.replay),
        learner_state=state.learner,
        node_bytes=harness.state_bytes(state.selfplay.games),
    )


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


def setup(config, stub_network: bool, only: str | None = None):
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
        ``harness.Measurements.as_dict()``: the two pipelines' calls, plus a
        "network floor" (and a "c4jax iteration") timing after every repeat.
    """
    from c4jax.alphazero import trainer

    run, init_key, play_root, variables, pipelines = setup(config, stub_network)
    apply_fn = stub_apply if stub_network else run.apply_fn
    floor = make_network_floor(run, apply_fn)
    floor_obs = jnp.zeros((config.train.selfplay_batch, 6, 7, 2), jnp.float32)
    iteration = lambda s, k: run.iteration(s, k)[0]  # noqa: E731

    measured = harness.Measurements()
    runners = [harness.InProcess(p, variables, play_root) for p in pipelines]
    for x in runners:
        measured.add_pipeline(x.name, x.pipeline.node_bytes, x.warm_up())
    measured.compile_s["network floor"] = harness.timed(floor, variables, floor_obs)[1].wall
    iteration_state = None
    if with_iteration:
        iteration_state, took = harness.timed(
            iteration, run.init(init_key), trainer.iteration_key(0, 0)
        )
        measured.compile_s["c4jax iteration"] = took.wall

    def after_repeat(r: int) -> None:
        nonlocal iteration_state
        if iteration_state is not None:
            iteration_state, took = harness.timed(
                iteration, iteration_state, trainer.iteration_key(0, r + 1)
            )
            measured.record("c4jax iteration", took)
        measured.record("network floor", harness.timed(floor, variables, floor_obs)[1])

    return harness.alternate(runners, repeats, measured, after_repeat).as_dict()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="cpu", help="preset name or JSON path (default cpu)")
    parser.add_argument("--blocks", type=bench_env.at_least(1), default=None,
                        help="residual blocks (preset: 3)")
    parser.add_argument("--channels", type=bench_env.at_least(1), default=None,
                        help="channels (preset: 32)")
    parser.add_argument("--sims", type=bench_env.at_least(1), default=None,
                        help="simulations per move (preset: 4)")
    parser.add_argument(
        "--algorithm", choices=("gumbel", "puct"), default=None, help="search (gumbel)"
    )
    parser.add_argument(
        "--batch", type=bench_env.at_least(1), default=None,
        help="games B in parallel, and the minibatch (preset: 256 and 128)"
    )
    parser.add_argument(
        "--steps", type=bench_env.at_least(1), default=None,
        help="moves T per chunk, and SGD steps per call (default: the preset's T and K, 16 and 64)"
    )
    parser.add_argument(
        "--minibatch", type=bench_env.at_least(1), default=None,
        help="SGD minibatch (default: --batch, else the preset's, 128)"
    )
    parser.add_argument(
        "--sgd-steps",
        type=bench_env.at_least(1),
        default=None,
        help="SGD steps per call (default: --steps, else the preset's, 64)",
    )
    parser.add_argument("--repeats", type=bench_env.at_least(1), default=5,
                        help="timed calls; the median counts")
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
    if args.iteration and args.stub_network:
        parser.error("--iteration times the fused run.iteration, whose self-play evaluates "
                     "the real network: drop --iteration or --stub-network")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark, prints a table and writes the JSON results."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        config = make_config(args)
    except ValueError as err:  # a setting the preset's rules refuse, named by the field
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.worker:
        _, _, play_root, variables, (p,) = setup(config, args.stub_network, only=args.worker)
        harness.serve_worker(harness.InProcess(p, variables, play_root))
        return {}
    info = harness.device_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    if args.xla_paths == "as-shipped":
        measured = harness.benchmark_processes(args.repeats, argv, module="bench.bench_train")
        print(f"XLA_FLAGS per pipeline: {measured['xla_flags']}")
    else:
        measured = benchmark(config, args.repeats, args.iteration, args.stub_network)
    load_end = os.getloadavg()
    summary = harness.summarize(config, measured)
    print(
        f"device: {info['device_kind']} ({info['platform']}, {info['cpu_count']} CPUs), "
        f"jax {info['jax_version']}, pgx {info['pgx_version']}, mctx {info['mctx_version']}; "
        f"load average {load_start[0]:.2f} -> {load_end[0]:.2f}"
    )
    harness.print_table(config, summary, args.repeats, args.stub_network)

    n, s, t = config.network, config.search, config.train
    settings = {
        "preset": args.config,
        "network": dataclasses.asdict(n),
        "search": dataclasses.asdict(s),
        "selfplay_batch": t.selfplay_batch,
        "selfplay_steps": t.selfplay_steps,
        "sgd_steps": t.sgd_steps,
        "minibatch_size": t.minibatch_size,
        "replay_capacity": t.replay_capacity,
        "mirror_augment": t.mirror_augment,
        "sgd_steps_in": "lax.scan",
        "loop_grads": jax.devices()[0].platform == "cpu",
        "repeats": args.repeats,
        "stub_network": args.stub_network,
        "xla_paths": args.xla_paths,
        "xla_flags": measured.get("xla_flags", os.environ.get("XLA_FLAGS", "")),
    }
    result = harness.result_record(
        measured,
        summary,
        device=info,
        load_average=(load_start, load_end),
        command=bench_env.command_line("bench.bench_train", argv),
        wall_s=time.perf_counter() - started,
        settings=settings,
    )
    suffix = "_as_shipped" if args.xla_paths == "as-shipped" else ""
    out = args.out or RESULTS_DIR / f"train_{info['platform']}{suffix}.json"
    harness.write_result(out, result)
    return result


if __name__ == "__main__":
    main()
