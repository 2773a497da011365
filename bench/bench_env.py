"""Random-play throughput of c4jax's env next to pgx's ``connect_four``.

Both environments run under one harness: every game plays a random legal move
each step and a finished game restarts at once from a precomputed initial
state. The "random" move comes from a cheap integer hash of a per-game uint32
counter (no threefry per step), so the harness costs little next to the env;
a third, empty "env" measures what the harness alone costs. Many moves of all
B games run inside one jitted ``lax.scan`` per timed call; compilation is
excluded and every timing ends with ``block_until_ready()``.

Usage::

    JAX_PLATFORMS=cpu python -m bench.bench_env --batch-sizes 1 64 1024 4096
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bench import outfile

NUM_ACTIONS = 7  # both envs: one action per column
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class EnvAdapter:
    """What the harness needs from an environment, all over batch shape [B].

    Attributes:
        name: label in the table.
        init: batch size B -> a batched state (the restart state of every game).
        legal: state -> [B, A] bool legal moves.
        step: (state, [B] int32 action) -> state.
        done: state -> [B] bool, whether the game has ended.
    """

    name: str
    init: Callable[[int], Any]
    legal: Callable[[Any], jax.Array]
    step: Callable[[Any, jax.Array], Any]
    done: Callable[[Any], jax.Array]


def c4jax_adapter() -> EnvAdapter:
    """c4jax's natively batched env."""
    from c4jax import env

    return EnvAdapter(
        name="c4jax",
        init=env.init_batch,
        legal=env.legal_action_mask,
        step=env.step,
        done=lambda s: s.terminated,
    )


def pgx_adapter() -> EnvAdapter:
    """pgx's ``connect_four`` (v2 API: ``step(state, action, key=None)``), vmapped."""
    import pgx

    game = pgx.make("connect_four")
    step = jax.vmap(game.step)  # key=None: Connect Four's step is deterministic

    def init(batch_size: int):
        keys = jax.random.split(jax.random.key(0), batch_size)
        return jax.vmap(game.init)(keys)

    return EnvAdapter(
        name="pgx",
        init=init,
        legal=lambda s: s.legal_action_mask,
        step=step,
        done=lambda s: s.terminated | s.truncated,
    )


class _NullState(NamedTuple):
    moves: jax.Array  # [B] int32, moves since the restart
    acc: jax.Array  # [B] uint32, folds in every action so that picking one is not dead code


def null_adapter() -> EnvAdapter:
    """No game at all: what the harness alone costs (every column legal, 42 moves a game)."""

    def init(batch_size: int) -> _NullState:
        return _NullState(jnp.zeros(batch_size, jnp.int32), jnp.zeros(batch_size, jnp.uint32))

    def legal(state: _NullState) -> jax.Array:
        return jnp.broadcast_to((state.moves >= 0)[:, None], state.moves.shape + (NUM_ACTIONS,))

    def step(state: _NullState, action: jax.Array) -> _NullState:
        return _NullState(state.moves + 1, state.acc ^ action.astype(jnp.uint32))

    return EnvAdapter("harness", init, legal, step, lambda s: s.moves >= 42)


def _hash(x: jax.Array) -> jax.Array:
    """[B] uint32 -> [B] uint32, a cheap avalanche mix (murmur3's finaliser)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def kth_legal_table(num_actions: int) -> np.ndarray:
    """[2**A * A] int32: entry ``bits * A + k`` is the k-th set bit of ``bits`` (0 if none)."""
    table = np.zeros((1 << num_actions, num_actions), np.int32)
    for bits in range(1 << num_actions):
        columns = [c for c in range(num_actions) if bits >> c & 1]
        table[bits, : len(columns)] = columns
    return table.reshape(-1)


def pick_legal(mask: jax.Array, counter: jax.Array, table: jax.Array) -> jax.Array:
    """A pseudo-random legal column per game, without a PRNG key.

    The mask is packed into an A-bit word, a hash of the counter picks k in
    0..(number legal - 1), and a lookup gives the k-th legal column. The lookup is
    a gather, which XLA computes once rather than re-deriving it inside every
    consumer of the action.

    Args:
        mask: [B, A] bool legal moves; at least one True per row.
        counter: [B] uint32 per-game counters, hashed into the choice.
        table: ``kth_legal_table(A)``.

    Returns:
        [B] int32 column of the k-th legal move.
    """
    num_actions = mask.shape[-1]
    weights = jnp.left_shift(jnp.uint32(1), jnp.arange(num_actions, dtype=jnp.uint32))  # [A]
    bits = jnp.sum(jnp.where(mask, weights, jnp.uint32(0)), axis=-1, dtype=jnp.uint32)  # [B]
    num_legal = jax.lax.population_count(bits)  # [B]
    k = ((_hash(counter) >> 16) * num_legal) >> 16  # [B] in 0..num_legal-1
    return jnp.take(table, (bits * num_actions + k).astype(jnp.int32), mode="clip")


def make_run(adapter: EnvAdapter, batch_size: int, num_steps: int):
    """Builds a jitted ``run(state, counter) -> (state, counter)`` of num_steps random moves.

    Each step first restarts the games that have ended, then plays a random legal
    move in every game: all B games advance by one move per step. (A static
    ``lax.scan`` length: a traced trip count let XLA hoist part of the pick out
    of the loop and slowed the loop down.)

    Returns:
        (run, initial state, initial [B] uint32 counter).
    """
    restart = adapter.init(batch_size)
    table = jnp.asarray(kth_legal_table(NUM_ACTIONS))

    def body(carry, _):
        state, counter = carry
        done = adapter.done(state)
        state = jax.tree.map(
            lambda r, s: jnp.where(jnp.reshape(done, done.shape + (1,) * (s.ndim - 1)), r, s),
            restart,
            state,
        )
        action = pick_legal(adapter.legal(state), counter, table)
        return (adapter.step(state, action), counter + jnp.uint32(1)), None

    @jax.jit
    def run(state, counter):
        return jax.lax.scan(body, (state, counter), None, length=num_steps)[0]

    counter = jnp.arange(batch_size, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9)
    return run, restart, counter


def _timed(run, carry):
    start = time.perf_counter()
    carry = jax.block_until_ready(run(*carry))
    return carry, time.perf_counter() - start


def calibrate(adapter: EnvAdapter, batch_size: int, seconds: float) -> int:
    """Moves per call for a call of about ``seconds``, from a 32-move probe program."""
    probe = 32
    run, state, counter = make_run(adapter, batch_size, probe)
    carry, _ = _timed(run, (state, counter))  # compile
    calls, total = 0, 0.0
    while total < 0.05:
        carry, took = _timed(run, carry)
        calls, total = calls + 1, total + took
    return max(1, round(seconds * probe * calls / total))


def time_envs(
    adapters: list[EnvAdapter],
    batch_size: int,
    repeats: int,
    seconds: float = 0.25,
    num_steps: int | None = None,
) -> dict[str, dict[str, float]]:
    """Steps per second (games x moves per second) of each env at batch size B.

    Each env gets its own number of moves per call, calibrated so that a call
    lasts about ``seconds`` (unless ``num_steps`` fixes it): a fast and a slow
    env are timed over equally long calls. The envs' timed calls alternate
    (c4jax, pgx, ..., c4jax, pgx, ...) so that load from other processes hits
    them alike; the best call counts, the median is kept too.

    Returns:
        {name: {"best": steps/s of the fastest call, "median": of the median call,
        "steps": moves per call}}.
    """
    runs = {}
    for adapter in adapters:
        steps = num_steps or calibrate(adapter, batch_size, seconds)
        run, state, counter = make_run(adapter, batch_size, steps)
        carry, _ = _timed(run, (state, counter))  # compile and warm up
        runs[adapter.name] = [run, carry, steps]
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, entry in runs.items():
            entry[1], took = _timed(entry[0], entry[1])
            times[name].append(took)
    return {
        name: {
            "best": batch_size * runs[name][2] / min(took),
            "median": batch_size * runs[name][2] / statistics.median(took),
            "steps": runs[name][2],
        }
        for name, took in times.items()
    }


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low`` (argparse names the flag)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"got {text!r}, allowed: a whole number >= {low}")
        return value

    return parse


def command_line(module: str, argv: list[str] | None = None) -> str:
    """The command that measured a result, as a shell would take it back:
    ``python -m module`` and ``argv`` (default ``sys.argv[1:]``) quoted with
    ``shlex.join``, so an empty argument (``--train.time-budget ''``) or one with
    spaces survives being pasted."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def device_info(packages: tuple[str, ...] = ("pgx",)) -> dict[str, Any]:
    """Where the numbers were taken: the device, the CPU's model (``cpu_model``: cloud
    VMs of one name differ twice in speed) and the versions of ``packages``."""
    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "num_devices": jax.device_count(),
        "jax_version": jax.__version__,
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        **{f"{name}_version": _version(name) for name in packages},
    }


def usable_cpus() -> int | None:
    """The CPUs this process may run on (fewer than ``cpu_count`` under ``taskset``);
    None where the system does not say."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def cpu_model(cpuinfo: str | None = None) -> str | None:
    """The CPU's model name with its family, model and widest vector extension, e.g.
    ``AMD EPYC (family 25 model 1, AVX2)``, from Linux's /proc/cpuinfo (or the text
    ``cpuinfo``); None where nothing can be read.

    Cloud VMs often name only the vendor line ("AMD EPYC"), while two of its
    generations differ twice in speed: the family, model and vector extensions
    tell them apart (Zen 3 has AVX2, Zen 4 AVX-512, Sapphire Rapids AVX-512 and AMX).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor() or None
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        if not colon:
            if fields:
                break  # the first processor's block is enough
            continue
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name")
    if name is None:
        return platform.processor() or None
    flags = set(fields.get("flags", "").split())
    widest = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else None
    details = [f"family {fields['cpu family']} model {fields['model']}"
               if "cpu family" in fields and "model" in fields else None, widest,
               "AMX" if "amx_tile" in flags else None]
    details = [d for d in details if d]
    return f"{name} ({', '.join(details)})" if details else name


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"got {text!r}, allowed: a number of seconds > 0")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--batch-sizes",
        type=at_least(1),
        nargs="+",
        default=None,
        help="batch sizes B (default 1 64 1024 4096, plus 16384 on a GPU/TPU)",
    )
    parser.add_argument(
        "--seconds",
        type=_positive_seconds,
        default=0.25,
        help="target length of one timed call; moves per call are calibrated per env",
    )
    parser.add_argument(
        "--steps", type=at_least(1), default=None,
        help="fixed moves per timed call (skips calibration)"
    )
    parser.add_argument("--repeats", type=at_least(1), default=10,
                        help="timed calls; the best counts")
    parser.add_argument("--out", type=outfile.path_arg("--out"), default=None,
                        help="JSON results file (default bench/results/env_<platform>.json)")
    parser.add_argument("--skip-pgx", action="store_true", help="time c4jax only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the benchmark, prints a table and writes the JSON results."""
    args = parse_args(argv)
    info = device_info()
    load_start = os.getloadavg()[0]  # other processes on the machine skew the timings
    batch_sizes = args.batch_sizes
    if batch_sizes is None:
        batch_sizes = [1, 64, 1024, 4096] + ([16384] if info["platform"] != "cpu" else [])
    adapters = [c4jax_adapter()]
    adapters += [] if args.skip_pgx else [pgx_adapter()]
    adapters += [null_adapter()]
    names = [a.name for a in adapters]

    rows = []
    print(
        f"device: {info['device_kind']} ({info['platform']}, {info['cpu_count']} CPUs), "
        f"jax {info['jax_version']}; steps/s = games x moves per second, best of {args.repeats}"
    )
    header = f"{'B':>6}" + "".join(f" {n + ' steps/s':>16}" for n in names)
    print(header + (f" {'c4jax/pgx':>9}" if "pgx" in names else ""))
    for batch_size in batch_sizes:
        rates = time_envs(adapters, batch_size, args.repeats, args.seconds, args.steps)
        row: dict[str, Any] = {"batch_size": batch_size}
        for name, rate in rates.items():
            row[f"{name}_steps_per_s"] = rate["best"]
            row[f"{name}_steps_per_s_median"] = rate["median"]
            row[f"{name}_moves_per_call"] = rate["steps"]
        line = f"{batch_size:>6}" + "".join(f" {rates[n]['best']:16.3e}" for n in names)
        if "pgx" in rates:
            row["ratio"] = rates["c4jax"]["best"] / rates["pgx"]["best"]
            row["ratio_median"] = rates["c4jax"]["median"] / rates["pgx"]["median"]
            line += f" {row['ratio']:9.2f}"
        rows.append(row)
        print(line)

    result = {
        "device": info,
        "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "command": command_line("bench.bench_env", argv),
        "date": time.strftime("%Y-%m-%d"),
        "repeats": args.repeats,
        "seconds_per_call": args.seconds,
        "harness": "random legal move from a hashed per-game counter (k-th legal column), "
        "finished games restart first; a jitted lax.scan of moves per call; best and median "
        "call of each env, calls alternating between envs",
        "results": rows,
    }
    out = args.out or RESULTS_DIR / f"env_{info['platform']}.json"
    outfile.write_json(out, result, name="--out")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
