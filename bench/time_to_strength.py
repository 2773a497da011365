"""Time to strength: wall time from launching ``python -m c4jax.train`` to the first
checkpoint whose mean mistake rate over the six full Pons sets is at most 6%, and
at most 3%, with 64 simulations.

The training runs as users run it, in a child process (the command line as
shipped, compiling included), with every checkpoint kept; this tool notes when
each checkpoint appears, counted from the launch. Once the training has ended
it evaluates the checkpoints in order until the last target is reached (or all
of them with ``--all``). The strength is judged on the full sets afterwards, so
judging costs the training nothing; nothing else should run beside it, as the
wall time is the figure.

    python -m bench.time_to_strength --config cpu --workdir runs/tts_cpu \\
        --out bench/results/time_to_strength_cpu
    python -m bench.time_to_strength ... -- --train.num-iterations 120   # train flags

The JSON (written after every evaluation) names the machine, the command and
the load average. Running the same command again continues it: a finished
training is not repeated and checkpoints judged before are not judged again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax

from bench import bench_env, outfile, strength_curve
from c4jax import inputs
from c4jax.judge import registry, solver
from c4jax.run import xla_flags
from c4jax.store import checkpoints

TARGETS = (6.0, 3.0)  # mean mistake rates over the sets, in percent
POLL_S = 0.2  # how often the checkpoints folder is looked at while training
KEEP_ALL = 100_000  # --keep-checkpoints: every checkpoint of any run this tool times
# Trainer flags this tool sets itself, and why they cannot follow "--".
_SET_HERE = {
    "--workdir": "give it before -- (the checkpoints are watched there)",
    "--config": "give it before -- (it is the record's)",
    "--keep-checkpoints": "set here: every checkpoint is kept, to be timed and judged",
}


def _steps_in(workdir: Path) -> set[int]:
    """The committed checkpoint steps (Orbax renames a finished save to its step)."""
    folder = workdir / "checkpoints"
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def train_and_watch(train_argv: list[str], workdir: Path, *, minutes: float | None,
                    poll_s: float = POLL_S) -> tuple[dict[int, float], float, int]:
    """Runs ``python -m c4jax.train --workdir WORKDIR *train_argv`` to its end.

    After ``minutes`` (if given) it is asked to stop as Ctrl-C would: it finishes
    its iteration and saves. Its output goes to this process's. It runs in a
    session of its own, so a Ctrl-C at the terminal reaches this process only,
    which passes one SIGINT on (as for SIGTERM and SIGHUP): a second one, as the
    terminal's own would have been, makes the training stop without saving.

    Returns:
        ``({step: seconds from the launch until its checkpoint appeared},
        seconds until the process ended, its exit code)``.
    """
    command = [sys.executable, "-m", "c4jax.train", "--workdir", str(workdir), *train_argv]
    seen: dict[int, float] = {}
    started = time.monotonic()
    proc = subprocess.Popen(command, start_new_session=True)
    asked = False
    previous = {signum: signal.signal(signum, _interrupted)
                for signum in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(signum) != signal.SIG_IGN}
    try:
        while proc.poll() is None:
            now = time.monotonic() - started
            for step in sorted(_steps_in(workdir) - seen.keys()):
                seen[step] = now
            if minutes is not None and not asked and now > 60 * minutes:
                proc.send_signal(signal.SIGINT)
                asked = True
            time.sleep(poll_s)
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # the child saves; then we stop too
        _wait_saving(proc)
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    ended = time.monotonic() - started
    for step in sorted(_steps_in(workdir) - seen.keys()):  # saved in the last poll interval
        seen[step] = ended
    return seen, ended, proc.returncode


def _interrupted(signum, frame) -> None:
    """SIGTERM or SIGHUP while the training runs: handled as a Ctrl-C."""
    raise KeyboardInterrupt


def _wait_saving(proc: subprocess.Popen) -> None:
    """Waits for the training to save and end; a further Ctrl-C here passes on once
    more (the training then stops without saving)."""
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)


def first_reaching(rows: list[dict], targets) -> dict[str, dict | None]:
    """``{target: the first row (in step order) whose "mean" is <= target, or None}``.

    Args:
        rows: ``{"step", "seconds", "mean"}`` dicts, ``mean`` in percent.
        targets: mean mistake rates in percent.
    """
    ordered = sorted(rows, key=lambda r: r["step"])
    return {
        _key(t): next(({"step": r["step"], "seconds": r["seconds"], "mean": r["mean"]}
                       for r in ordered if r["mean"] <= t), None)
        for t in targets
    }


def _key(target: float) -> str:
    return f"{target:g}"


def _write(path: Path, record: dict) -> None:
    outfile.write_json(path, record, name="--out", indent=1, default=float)


def _targets(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, allowed: percents such as 6,3") from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise argparse.ArgumentTypeError(f"got {text!r}, allowed: percents in 0..100")
    return values


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    train_argv = []
    if "--" in argv:
        cut = argv.index("--")
        argv, train_argv = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(prog="python -m bench.time_to_strength",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="cpu", help="the preset to train (default cpu)")
    parser.add_argument("--workdir", type=Path, required=True,
                        help="the run's folder: new, or the one of an earlier call with --out")
    parser.add_argument("--out", type=outfile.path_arg("--out", ".json", ".png"), required=True,
                        help="output path without suffix")
    parser.add_argument("--targets", type=_targets, default=TARGETS,
                        help="mean mistake rates in percent (default 6,3)")
    parser.add_argument("--sims", type=int, default=64,
                        help=f"simulations of the judged searches, 0-{inputs.MAX_SIMULATIONS}"
                        " (default 64)")
    parser.add_argument("--sets", default=",".join(solver.SET_NAMES))
    parser.add_argument("--positions", type=bench_env.at_least(1), default=None,
                        help="the first N of each set (default all 1000)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop the training after this long (it saves first)")
    parser.add_argument("--all", action="store_true",
                        help="judge every checkpoint, not only until the last target")
    args = parser.parse_args(argv)
    unknown = set(args.sets.split(",")) - set(solver.SET_NAMES)
    if unknown:
        parser.error(f"--sets: got {sorted(unknown)}, allowed: {','.join(solver.SET_NAMES)}")
    if not 0 <= args.sims <= inputs.MAX_SIMULATIONS:
        parser.error(f"--sims: got {args.sims}, allowed: 0-{inputs.MAX_SIMULATIONS}")
    for flag, why in _SET_HERE.items():
        if any(a == flag or a.startswith(flag + "=") for a in train_argv):
            parser.error(f"{flag} after --: {why}")
    if args.minutes is not None and not args.minutes > 0:
        parser.error(f"--minutes: got {args.minutes:g}, allowed: a number > 0")
    return args, train_argv


def main(argv: list[str] | None = None) -> int:
    args, train_argv = parse_args(argv)
    xla_flags.enable_fast_cpu()  # the command lines' code path, before the first device query
    checkpoints.quiet_orbax_logs()
    path = args.out.with_suffix(".json")
    command = bench_env.command_line("bench.time_to_strength", argv)
    same = {"config": args.config, "workdir": str(args.workdir), "train_args": train_argv}
    record = json.loads(path.read_text()) if path.exists() else None
    if record is None or any(record.get(k) != v for k, v in same.items()):
        if _steps_in(args.workdir):
            print(f"error: {args.workdir} already has checkpoints, and {path} is not the "
                  "record of their training: give a new --workdir", file=sys.stderr)
            return 2
        record = {**same, "rows": []}
    judged = {"sims": args.sims, "sets": args.sets.split(","), "positions": args.positions}
    if any(record.get(k) != v for k, v in judged.items()):
        record["rows"] = []  # judged otherwise before: judged again
    record.update(command=command, **judged)

    if "checkpoint_seconds" not in record:
        train = ["--config", args.config, "--keep-checkpoints", str(KEEP_ALL), *train_argv]
        # The devices are asked for after the training: asking starts JAX's backend in
        # this process, which on a GPU or TPU would hold the memory or the chip the
        # training needs.
        load_before = os.getloadavg()
        record["train_command"] = command  # a later call, judging only, keeps it
        try:
            seen, ended, code = train_and_watch(train, args.workdir, minutes=args.minutes)
        except KeyboardInterrupt:
            print(f"interrupted: the training saved a checkpoint in {args.workdir}; this "
                  "measurement times a run from its launch, so start again with a new "
                  "--workdir", file=sys.stderr)
            return 130
        record["device"] = {**bench_env.device_info(("mctx", "flax")),
                            "load_average_before": load_before,
                            "load_average_after": os.getloadavg()}
        if code not in (0, 130):
            print(f"error: the training exited with {code}", file=sys.stderr)
            return 1
        record.update(checkpoint_seconds={str(s): t for s, t in sorted(seen.items())},
                      train_seconds=ended, train_exit_code=code)
        _write(path, record)

    seconds = {int(s): t for s, t in record["checkpoint_seconds"].items()}
    done = {r["step"] for r in record["rows"]}
    for step in sorted(seconds):
        if not args.all and all(first_reaching(record["rows"], args.targets).values()):
            break
        if step in done:
            continue
        try:
            _, agent = registry.make_run_agent(args.workdir, step=step, sims=args.sims)
            results = solver.evaluate_agent(agent, jax.random.key(0), record["sets"],
                                            args.positions, batch_size=500)
        except ValueError as err:  # a checkpoint gone or damaged since it was timed
            print(f"error: checkpoint {step}: {registry.short_error(err)}; the checkpoints"
                  f" judged so far are in {path}, and the same command goes on from there",
                  file=sys.stderr)
            return 1
        rates = {name: 100 * r["mistake_rate"] for name, r in results.items()}
        row = {"step": step, "seconds": seconds[step], "rates": rates,
               "mean": sum(rates.values()) / len(rates)}
        record["rows"] = sorted([*record["rows"], row], key=lambda r: r["step"])
        record["targets"] = first_reaching(record["rows"], args.targets)
        _write(path, record)
        print(f"step {step:4d} at {seconds[step] / 60:6.1f} min: mean {row['mean']:5.2f}%  "
              + "  ".join(f"{n} {v:.1f}" for n, v in rates.items()), flush=True)

    record["targets"] = first_reaching(record["rows"], args.targets)
    _write(path, record)
    rows = [{"minutes": r["seconds"] / 60,
             "results": {n: {"mistake_rate": v / 100} for n, v in r["rates"].items()}}
            for r in record["rows"]]
    if rows:
        strength_curve.plot(rows, record["sets"], args.out.with_suffix(".png"),
                            f"{args.config}: time to strength, {args.sims} simulations")
    for target, hit in record["targets"].items():
        where = "not reached" if hit is None else (
            f"{hit['seconds'] / 60:.1f} min (checkpoint {hit['step']}, mean {hit['mean']:.2f}%)")
        print(f"mean mistake rate <= {target}%: {where}")
    print(f"wrote {path}" + (f" and {args.out.with_suffix('.png')}" if rows else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
