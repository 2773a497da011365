"""``python -m c4jax.export network RUN_DIR[:STEP] OUT_DIR``: a run's network alone.

Writes the network variables of a checkpoint (default: the run's best) with
the run's configuration and a note of how it was made: a few hundred KB that
``checkpoints.load_exported`` reads back, with no optimizer, replay buffer or
games. The pretrained agent in ``c4jax/pretrained`` is made this way:

    python -m c4jax.export network runs/strong c4jax/pretrained --results results.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from c4jax import checkpoints


def _commit() -> str | None:
    """The git commit of the working tree, or None outside a repository."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _wall_time(run_dir: Path, step: int) -> float | None:
    """Seconds of training up to ``step`` by the run's metrics.jsonl (None if unknown)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return None
    total = 0.0
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("step", 0) <= step:
            total += float(record.get("seconds", 0.0))
    return round(total, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.export", description="Export a trained network."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    net = sub.add_parser("network", help="a checkpoint's network variables, config and info")
    net.add_argument("run", help="RUN_DIR or RUN_DIR:STEP (default step: the best)")
    net.add_argument("out_dir", help="directory to write (created if needed)")
    net.add_argument("--note", default="", help="free text kept in info.json")
    net.add_argument(
        "--results", default=None, help="a JSON file (e.g. evaluate --json) kept in info.json"
    )
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()

    run, _, step_text = args.run.partition(":")
    if step_text and not step_text.isdigit():
        print(f"error: {args.run}: STEP {step_text!r} is not a whole number", file=sys.stderr)
        return 2
    results = None
    if args.results:
        try:
            results = json.loads(Path(args.results).read_text())
        except (OSError, json.JSONDecodeError) as err:
            print(f"error: --results {args.results}: {err}", file=sys.stderr)
            return 2
    try:
        restored = checkpoints.restore_variables(run, int(step_text) if step_text else None)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    info = {
        "source_run": Path(run).name,
        "commit": _commit(),
        "training_seconds": _wall_time(Path(run), restored.step),
        "exported": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "note": args.note,
        "results": results,
    }
    try:
        out = checkpoints.export_network(restored, args.out_dir, info)
    except OSError as err:
        print(f"error: {args.out_dir}: {err}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {out} (step {restored.step}, {size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
