"""The timing harness of ``bench.bench_train``: two training pipelines, timed alike.

A pipeline (``Pipeline``) is a jitted self-play chunk and a jitted SGD call with
the state they carry: ``bench.bench_train`` builds c4jax's, ``bench.reference_pgx``
the pgx-style reference. The harness times them the same way:

* **Warm-up excluded**: a pipeline's first self-play chunk and first SGD call
  compile (their times are kept apart, ``compile_s``), and one more chunk
  fills the replay buffer; none of it counts.
* **Alternation**: each repeat times one self-play chunk of each pipeline, then
  one SGD call of each, the order reversed every other repeat, so that load
  from other processes hits both alike; every call ends in
  ``jax.block_until_ready``; repeat ``r`` hands both the same key.
* **One result schema**: every timed call is a ``Call`` (wall seconds, process
  CPU seconds, positions given targets), whether it ran in this process or in
  a worker; ``Measurements`` gathers them under the labels ``"<pipeline>
  self-play"`` and ``"<pipeline> sgd"`` (and any extra timings), with each
  pipeline's compile times and bytes per tree node.
* **Workers** (``--xla-paths as-shipped``): XLA reads its flags once per
  process, so each pipeline can run in a worker process of its own
  (``serve_worker``, with ``pipeline_env``'s flags); the parent asks them in
  turn for one timed call at a time (the idle one waits on its stdin), in the
  same alternation.
* **Reporting**: medians, throughputs, the c4jax / reference ratios and the
  paired ratio (the median of per-repeat ratios), the table, the JSON record.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jax
import numpy as np

from bench import bench_env, outfile

PIPELINES = ("c4jax", "reference")  # the two pipelines the ratios compare, in this order


# --------------------------------------------------------------------------
# Pipelines and the one result schema


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


def state_bytes(state: Any) -> int:
    """Bytes of one element of a batched pytree (leading dimension B)."""
    return sum(x.dtype.itemsize * int(np.prod(x.shape[1:])) for x in jax.tree.leaves(state))


@dataclass(frozen=True)
class Call:
    """One timed call of either pipeline, in this process or in a worker.

    Attributes:
        wall: wall-clock seconds.
        cpu: process CPU seconds.
        found: positions given value targets (self-play chunks), else None.
    """

    wall: float
    cpu: float
    found: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The worker protocol's line: ``{"wall", "cpu"}`` plus ``"found"`` when known."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Call:
        return cls(wall=record["wall"], cpu=record["cpu"], found=record.get("found"))


@dataclass
class Measurements:
    """Every timed call of a benchmark run, by label, and what each pipeline reported.

    ``as_dict`` is the measurements' JSON form (``summarize`` reads it):
    {"times": {label: [wall s]}, "cpu_times": {label: [CPU s]},
    "positions_with_targets": {pipeline: [rows per chunk]}, "node_bytes":
    {pipeline: bytes}, "compile_s": {label: seconds}}, plus "xla_flags":
    {pipeline: flags} when the pipelines ran in workers.
    """

    times: dict[str, list[float]] = field(default_factory=dict)
    cpu_times: dict[str, list[float]] = field(default_factory=dict)
    positions_with_targets: dict[str, list[int]] = field(default_factory=dict)
    node_bytes: dict[str, int] = field(default_factory=dict)
    compile_s: dict[str, float] = field(default_factory=dict)
    xla_flags: dict[str, str] | None = None

    def add_pipeline(self, name: str, node_bytes: int, compile_s: dict[str, float]) -> None:
        self.positions_with_targets[name] = []
        self.node_bytes[name] = node_bytes
        self.compile_s.update(compile_s)

    def record(self, label: str, call: Call, pipeline: str | None = None) -> None:
        """Adds one timed call; a self-play chunk of ``pipeline`` also adds its targets."""
        self.times.setdefault(label, []).append(call.wall)
        self.cpu_times.setdefault(label, []).append(call.cpu)
        if pipeline is not None:
            self.positions_with_targets[pipeline].append(call.found)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "times": self.times,
            "cpu_times": self.cpu_times,
            "positions_with_targets": self.positions_with_targets,
            "node_bytes": self.node_bytes,
            "compile_s": self.compile_s,
        }
        if self.xla_flags is not None:
            out["xla_flags"] = self.xla_flags
        return out


# --------------------------------------------------------------------------
# Timing in this process


def timed(fn: Callable, *args) -> tuple[Any, Call]:
    """``(fn(*args), Call)``, waiting for the result."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn(*args))
    return out, Call(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu)


def repeat_key(play_root: jax.Array, repeat: int) -> jax.Array:
    """The key of timed repeat ``repeat``: the same for both pipelines, and in any process."""
    return jax.random.fold_in(play_root, 100 + repeat)


class Runner(Protocol):
    """A pipeline the alternation can ask for timed calls (in this process or a worker)."""

    name: str

    def play(self, repeat: int) -> Call: ...

    def learn(self, repeat: int) -> Call: ...


class InProcess:
    """Times a ``Pipeline`` in this process.

    Args:
        pipeline: the pipeline (its ``carry`` and ``learner_state`` advance with every call).
        variables: the frozen network self-play evaluates.
        play_root: the key the warm-up and repeat keys derive from.
    """

    def __init__(self, pipeline: Pipeline, variables: Any, play_root: jax.Array):
        self.pipeline, self.variables, self.play_root = pipeline, variables, play_root
        self.name = pipeline.name

    def _play(self, key: jax.Array) -> Call:
        p = self.pipeline
        (p.carry, found), call = timed(p.play, self.variables, key, p.carry)
        return dataclasses.replace(call, found=int(found))

    def _learn(self, key: jax.Array) -> Call:
        p = self.pipeline
        (p.learner_state, _), call = timed(p.learn, p.learner_state, p.carry[1], key)
        return call

    def warm_up(self) -> dict[str, float]:
        """Compiles, then one more chunk so that the buffer holds data; the compile times."""
        root = self.play_root
        compile_s = {f"{self.name} self-play": self._play(jax.random.fold_in(root, 0)).wall}
        self._play(jax.random.fold_in(root, 1))
        compile_s[f"{self.name} sgd"] = self._learn(jax.random.fold_in(root, 2)).wall
        return compile_s

    def play(self, repeat: int) -> Call:
        """One timed self-play chunk."""
        return self._play(repeat_key(self.play_root, repeat))

    def learn(self, repeat: int) -> Call:
        """One timed SGD call."""
        return self._learn(repeat_key(self.play_root, repeat))


def alternate(
    runners: Sequence[Runner],
    repeats: int,
    measured: Measurements,
    after_repeat: Callable[[int], None] | None = None,
) -> Measurements:
    """Times ``repeats`` rounds: each runner's self-play chunk, then each one's SGD call,
    the order reversed every other round; ``after_repeat(r)`` may time more."""
    for r in range(repeats):
        order = list(runners) if r % 2 == 0 else list(runners)[::-1]
        for x in order:
            measured.record(f"{x.name} self-play", x.play(r), pipeline=x.name)
        for x in order:
            measured.record(f"{x.name} sgd", x.learn(r))
        if after_repeat is not None:
            after_repeat(r)
    return measured


# --------------------------------------------------------------------------
# One process per pipeline (--xla-paths as-shipped)

_MARK = "@bench_train "  # prefixes a worker's result lines (anything else on stdout is not)
_ROOT = Path(__file__).resolve().parent.parent  # the repository: workers run ``-m bench....``


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


def serve_worker(runner: InProcess) -> None:
    """Times one pipeline on request: compiles, says so, then answers ``play R`` and
    ``learn R`` lines on stdin with one ``Call`` line each, until stdin closes."""
    compile_s = runner.warm_up()
    _say({"compile_s": compile_s, "node_bytes": runner.pipeline.node_bytes,
          "xla_flags": os.environ.get("XLA_FLAGS", "")})
    for line in sys.stdin:
        command, repeat = line.split()
        ask = runner.play if command == "play" else runner.learn
        _say(ask(int(repeat)).to_json())


class Worker:
    """A ``serve_worker`` process for one pipeline: ``python -m <module> <argv> --worker
    <name>``, on the XLA flags of ``pipeline_env(name)``."""

    def __init__(self, name: str, argv: list[str], module: str):
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *argv, "--worker", name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=pipeline_env(name), cwd=_ROOT,
        )

    def read(self) -> dict[str, Any]:
        for line in self.proc.stdout:
            if line.startswith(_MARK):
                return json.loads(line[len(_MARK):])
        raise RuntimeError(f"the {self.name} worker stopped (exit status {self.proc.wait()})")

    def ask(self, command: str, repeat: int) -> Call:
        self.proc.stdin.write(f"{command} {repeat}\n")
        self.proc.stdin.flush()
        return Call.from_json(self.read())

    def play(self, repeat: int) -> Call:
        return self.ask("play", repeat)

    def learn(self, repeat: int) -> Call:
        return self.ask("learn", repeat)

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def benchmark_processes(repeats: int, argv: list[str], module: str) -> dict[str, Any]:
    """The measurements with each pipeline in a worker process of its own.

    ``argv``: the benchmark's own arguments, handed to the workers (which build
    the same configuration from them); ``module``: the command line the workers
    run (it must call ``serve_worker`` on ``--worker NAME``). The workers
    compile side by side; then every timed call runs alone, alternating as in
    this process.
    """
    workers = [Worker(name, argv, module) for name in PIPELINES]
    try:
        measured = Measurements(xla_flags={})
        for w in workers:
            ready = w.read()
            measured.add_pipeline(w.name, ready["node_bytes"], ready["compile_s"])
            measured.xla_flags[w.name] = ready["xla_flags"]
        alternate(workers, repeats, measured)
    finally:
        for w in workers:
            w.close()
    return measured.as_dict()


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
    for name in PIPELINES:
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
            f"{'stub network' if stub else 'network'} alone ({floor['forward_passes']} "
            "forward passes of B per chunk): "
            f"{floor['positions_per_s']:.1f} pos/s, {floor['seconds']:.3f} s"
        )
    if "c4jax_fused_iteration_s" in summary:
        print(
            f"c4jax fused run.iteration: {summary['c4jax_fused_iteration_s']:.3f} s "
            f"(pieces: {rows['c4jax']['iteration_s']:.3f} s)"
        )


DEFINITIONS = {
    "selfplay_positions_per_s": "B x T searched positions / median self-play chunk "
    "time (search, env steps, restarts, value targets, replay add)",
    "train_samples_per_s": "sgd_steps x minibatch / median time of one call of "
    "sgd_steps SGD steps (sampling + observation + learner step)",
    "positions_with_targets_per_chunk": "rows added to the replay buffer per chunk",
    "node_bytes": "bytes of one game's env state, stored at every search-tree node",
    "network_floor": "T x (sims + 1) forward passes of batch B alone (of the stub "
    "with --stub-network)",
    "ratio_c4jax_over_reference.iteration": "reference (chunk + sgd) time / c4jax's",
    "ratio_c4jax_over_reference.paired_median": "median over repeats of reference "
    "time / c4jax time of the same repeat (wall and process CPU time)",
}


def result_record(
    measured: dict[str, Any],
    summary: dict[str, Any],
    *,
    device: dict[str, Any],
    load_average: tuple[Sequence[float], Sequence[float]],
    command: str,
    wall_s: float,
    settings: dict[str, Any],
    definitions: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The JSON results file: where and how it ran, the raw times and the summary
    (``definitions`` of its figures: ``DEFINITIONS``, bench_train's, by default)."""
    return {
        "device": device,
        "load_average": {"start": list(load_average[0]), "end": list(load_average[1])},
        "command": command,
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": wall_s,
        "settings": settings,
        "definitions": DEFINITIONS if definitions is None else definitions,
        "compile_s": measured["compile_s"],
        "times_s": measured["times"],
        "cpu_times_s": measured["cpu_times"],
        "summary": summary,
    }


def write_result(out: Path, record: dict[str, Any]) -> None:
    """Writes the JSON results file ``out`` whole (its folder made if missing) and says
    so (``outfile.write_json``: on stdout if it cannot be written)."""
    outfile.write_json(out, record, name="--out")
    print(f"wrote {out}")
