"""``python -m c4jax.train``: the thin Python loop around the fused step.

Usage:
    python -m c4jax.train                      # preset for the hardware found
    python -m c4jax.train --config tiny        # or configs/tiny.json
    python -m c4jax.train --config cpu --train.num-iterations 50 --seed 3
    python -m c4jax.train --workdir runs/X     # continue runs/X if it has checkpoints
    python -m c4jax.train --resume             # continue the newest run in runs/
    python -m c4jax.train --distributed        # one process per host (SLURM, TPU pod)
    python -m c4jax.train --coordinator HOST:PORT --num-processes N --process-id I

A run directory holds ``config.json``, ``metrics.jsonl``, TensorBoard event
files (``tb/``) and Orbax checkpoints (``checkpoints/``). Ctrl-C saves a
checkpoint and exits (code 130; a second Ctrl-C aborts at once); running again
with the same ``--workdir`` continues bit-for-bit where it stopped. A lock file
keeps a second trainer out of a directory in use; a damaged newest checkpoint
is moved to ``damaged-checkpoints/`` and the run continues from the newest good
one; a NaN/inf loss stops the run without saving the broken state.

Several processes (``c4jax.run.distributed``) train as one: process 0 alone locks
the directory, logs and prints; all write the checkpoints together, and each
evaluates on its own copy of the network. A Ctrl-C on any of them stops all
at the same iteration; one that dies ends the others with an error.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads, so a Ctrl-C while importing exits cleanly too
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted before training started.")

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import re
import sys
import threading
import warnings
from pathlib import Path

import jax

from c4jax.alphazero import config as config_lib
from c4jax.alphazero.config import Config
from c4jax.run import cli, distributed, interrupt, rundir, runlog, train_alphazero, xla_flags
from c4jax.store import checkpoints

RUNS_DIR = Path("runs")
NonFiniteError = train_alphazero.NonFiniteError


def default_preset() -> str:
    """The preset for the hardware found: cpu, gpu or tpu."""
    backend = jax.default_backend()
    return {"gpu": "gpu", "tpu": "tpu"}.get(backend, "cpu")


# Measured seconds per iteration of the presets on the 2-core CPU VM (after
# compiling, evaluation included), for the expected time printed at start-up:
# (XLA's default CPU code paths, with xla_flags.enable_fast_cpu's YNNPACK fusion).
# These are the AMD EPYC (Zen 4) VM of sessions 1-13. strong: 230 iterations in 123
# min on the default path (shared with other jobs part of the time); 700 in 119 min of
# wall time with YNNPACK, BatchNorm folding and root reuse, alone on the machine (run
# strong4, session 9); 550 iterations of 32 SGD steps: 11.2-12 s an iteration and 4.5
# min of compiling with YNNPACK, 115 min of wall time (run strong5, session 10); the
# default-path pair (38 s, 300 s) is scaled from the 16-step figures, not measured.
# cpu with YNNPACK, now 280 iterations: 17.1 min of wall time (38 s compiling; the
# last 4 min beside the test suite), 9.5 min for 170 (runs cpu280, cpu170, session
# 11); its default-path pair (9 s, 120 s) predates BatchNorm folding and root reuse.
_CPU_SECONDS_PER_ITERATION = {"cpu": (9.0, 3.4), "strong": (38.0, 12.0), "tiny": (0.3, 0.3)}
_CPU_COMPILE_SECONDS = {"cpu": (120.0, 40.0), "strong": (300.0, 270.0), "tiny": (20.0, 20.0)}
# The YNNPACK path on a faster 2-core VM, an Intel Xeon (Sapphire Rapids, AVX-512),
# as (compile seconds, seconds an iteration): strong, 760 iterations in 107 min of
# wall time, about 20 of them beside a niced test suite (run strong13, session 15):
# 7.9 s is its 100 min of iterations (evaluations included) over 760 (7.1-7.6 s
# alone), and 150 s the first iteration of run strong14 (session 16). Where a preset
# has this second figure the expected time is the range between the two machines.
_CPU_FAST_PATH_FASTER_VM = {"strong": (150.0, 7.9)}


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What the command line asked for."""

    config: Config
    workdir: Path
    source: str  # where the defaults came from: "preset cpu" or the run's config.json
    preset: str | None  # the preset's name, if the defaults came from one
    progress: runlog.Mode
    print_config: bool  # print the resolved configuration and exit
    cluster: distributed.Cluster | None  # --coordinator, --num-processes, --process-id


def parse_args(argv: list[str]) -> Invocation:
    """Reads ``--config``, ``--workdir``, ``--resume``, ``--no-progress``,
    ``--print-config``, the multi-process flags and per-field overrides.

    A run directory that already holds a ``config.json`` supplies the defaults
    (so resuming needs no flags); otherwise the preset does. Any of
    ``--coordinator``, ``--num-processes``, ``--process-id`` implies
    ``--distributed``; they belong to this process, not to the run, so they are
    not part of the ``Config`` (nor of ``config.json``).
    """
    cluster, argv = distributed.parse_flags(argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    pre.add_argument("--workdir", default=None)
    pre.add_argument("--resume", action="store_true")
    pre.add_argument("--no-progress", action="store_true")
    pre.add_argument("--print-config", action="store_true")
    known, rest = pre.parse_known_args(argv)
    if known.resume and known.workdir is None:
        known.workdir = str(rundir.newest_run(RUNS_DIR))
    workdir = Path(known.workdir) if known.workdir else (
        RUNS_DIR / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    stored = workdir / "config.json"
    preset = None
    if known.config is None and stored.is_file():
        base = config_lib.load(str(stored))
        source = f"the run directory's {stored}"
    else:
        name = known.config or default_preset()
        base = config_lib.load(name)
        preset = name if name in config_lib.preset_names() else None
        source = f"preset {name}" if preset else f"config file {name}"
    if known.resume and not stored.is_file():
        raise ValueError(f"--resume: {workdir} holds no run (no config.json)")
    description = (
        "Train AlphaZero for Connect Four.\n\n"
        f"Defaults below come from {source}.\n"
        "Extra flags: --config NAME|PATH (presets: "
        + ", ".join(config_lib.preset_names())
        + "), --workdir DIR (default runs/<date-time>; continues a run there), "
        "--resume (continue --workdir, or the run in runs/ written to last), "
        "--no-progress (one plain line per iteration instead of a bar), "
        "--print-config (print the resolved configuration as JSON and exit), "
        "--coordinator HOST:PORT --num-processes N --process-id I (a multi-process "
        "run without a cluster manager; each implies --distributed)."
    )
    config = cli.tyro_cli(
        Config, default=base, args=rest, description=description, prog="python -m c4jax.train"
    )
    if cluster is not None:
        config = dataclasses.replace(config, distributed=True)
    mode: runlog.Mode = "lines" if known.no_progress else runlog.default_mode()
    return Invocation(config, workdir, source, preset, mode, known.print_config, cluster)


def expected_time(config: Config, preset: str | None, iterations: int) -> str:
    """A start-up estimate of the run's wall time, where one was measured."""
    if jax.default_backend() != "cpu" or preset not in _CPU_SECONDS_PER_ITERATION:
        return "expected time: shown once the first iterations have run"
    reference = config_lib.load(preset)
    same = lambda c: dataclasses.replace(  # noqa: E731
        c, seed=0, train=dataclasses.replace(c.train, num_iterations=1)
    )
    if same(config) != same(reference):
        return "expected time: shown once the first iterations have run"
    fast = int(xla_flags.fast_cpu_on())
    compile_s = _CPU_COMPILE_SECONDS[preset][fast]
    seconds = compile_s + iterations * _CPU_SECONDS_PER_ITERATION[preset][fast]
    if fast and preset in _CPU_FAST_PATH_FASTER_VM:
        low_compile_s, low_per_iteration = _CPU_FAST_PATH_FASTER_VM[preset]
        low = low_compile_s + iterations * low_per_iteration
        return (
            f"expected time: about {runlog.format_duration(low)} to "
            f"{runlog.format_duration(seconds)} on a 2-core CPU, depending on the CPU "
            f"(compiling first: about {runlog.format_duration(low_compile_s)} to "
            f"{runlog.format_duration(compile_s)})"
        )
    return (
        f"expected time: about {runlog.format_duration(seconds)} on a 2-core CPU "
        f"(compiling first: about {runlog.format_duration(compile_s)})"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    xla_flags.enable_fast_cpu()  # before the first device query
    try:
        cluster, _ = distributed.parse_flags(argv)
        early = cluster is not None or "--distributed" in argv
        if early and "--print-config" not in argv:
            distributed.initialize(cluster)  # must precede every device query below
        call = parse_args(argv)
        if call.config.distributed and not call.print_config:
            if not jax.distributed.is_initialized():  # asked for by the run's config.json
                distributed.initialize(call.cluster)
        config_lib.validate(call.config, num_devices=jax.device_count())
        if call.print_config:
            print(json.dumps(config_lib.to_dict(call.config), indent=2))
            return 0
        rundir.prepare(call.workdir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cli.one_line_warnings()
    checkpoints.quiet_orbax_logs()
    config, workdir = call.config, call.workdir
    # Process 0 speaks for a multi-process run; the others print only errors.
    say = print if jax.process_index() == 0 else (lambda *a, **k: None)
    if jax.process_index() != 0:  # process 0 reports a damaged checkpoint it moves aside
        warnings.simplefilter("ignore", checkpoints.DamagedCheckpointWarning)
    devices = f"{jax.device_count()} x {jax.devices()[0].platform}"
    if jax.process_count() > 1:
        devices += f" in {jax.process_count()} processes"
    say(
        f"c4jax.train: {call.source}, {config.train.num_iterations} iterations on {devices}; "
        f"run directory {workdir} (configuration in {workdir / 'config.json'})"
    )
    say(expected_time(config, call.preset, config.train.num_iterations))
    if jax.default_backend() == "cpu":
        say(xla_flags.describe())
    try:
        summary = train_alphazero.train_and_evaluate(config, workdir, progress=call.progress)
    except (ValueError, NonFiniteError, jax.errors.JaxRuntimeError) as err:
        several = jax.process_count() > 1
        message, code = str(err), 2 if isinstance(err, ValueError) else 1
        if several and _peer_failure(err):
            first = (message.strip().splitlines() or [""])[0]
            message, code = (
                f"process {jax.process_index()} of {jax.process_count()} lost contact with "
                f"the others ({first}); another process has probably stopped: see its "
                f"output. Continue from the last checkpoint in {workdir} by starting every "
                "process again with the same command."
            ), 1
        elif isinstance(err, jax.errors.JaxRuntimeError):
            raise
        print(f"error: {message}", file=sys.stderr)
        return _leave(code) if several else code
    if summary["interrupted"]:
        return interrupt.EXIT_CODE
    if summary["done"]:
        final = ", ".join(f"{k} {v:.3f}" for k, v in summary["eval"].items())
        say(f"finished iteration {summary['step']}; last evaluation: {final or 'none'}")
    say(f"outputs in {workdir}; view with: {_tensorboard_command(workdir)}")
    return 0


_STATUS = re.compile(r"^[A-Z_]+: ")  # how XLA's errors begin: "UNKNOWN: Gloo AllGather failed"


def _peer_failure(err: Exception) -> bool:
    """Whether ``err`` is a runtime failure (a collective with a dead process),
    not one of c4jax's own errors. Such a failure reaches Python as a
    ``JaxRuntimeError``, or as a ValueError when NumPy reads the failed array."""
    return isinstance(err, jax.errors.JaxRuntimeError) or bool(_STATUS.match(str(err)))


def _leave(code: int, wait: float = 10.0) -> int:
    """Ends this process of a multi-process run with ``code``, not waiting for a dead one.

    JAX's exit handler waits at a shutdown barrier for every process: when all
    stop on the same error they meet there at once, but when one has died it
    would wait until the heartbeat timeout (100 s) and then abort with a page
    of logs. So the barrier gets ``wait`` seconds in a thread, then
    ``os._exit``.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    shutdown = threading.Thread(target=jax.distributed.shutdown, daemon=True)
    shutdown.start()
    shutdown.join(wait)
    os._exit(code)


def _tensorboard_command(workdir: Path) -> str:
    command = f"tensorboard --logdir {workdir / 'tb'}"
    if importlib.util.find_spec("tensorboard") is None:
        command += " (first: pip install 'c4jax[tensorboard]')"
    return command


if __name__ == "__main__":
    sys.exit(main())
