"""``python -m c4jax.export``: a run's network alone, or a static page that plays it.

``network RUN_DIR[:STEP] OUT_DIR`` writes the network variables of a
checkpoint (default: the run's best) with the run's configuration and a note
of how it was made (``info.json``: the step, the training time, the c4jax version
and, when c4jax runs from a git checkout of its own, that checkout's commit): a few
hundred KB that ``exported.load_exported`` reads back, with no optimizer, replay
buffer or games. The pretrained agent in
``c4jax/pretrained`` is made this way:

    python -m c4jax.export network runs/strong c4jax/pretrained --results results.json

``web OUT_DIR [--run RUN_DIR[:STEP]] [--ort-dir DIR]`` writes a static page
(``index.html``, JS, the network as ``model.onnx`` and onnxruntime-web's files)
that plays the network in a browser without Python (alone by default, or with a
small search written in the page); default network:
the pretrained agent. ``c4jax.web.onnx`` does the work; it needs the
``export`` extra.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads: Ctrl-C anywhere is a short message and 130
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted.")

import argparse
import datetime
import json
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from c4jax import inputs
from c4jax.judge import registry
from c4jax.store import checkpoints, exported


def _version() -> str:
    """c4jax's version from the installed metadata (``0+unknown`` if never installed)."""
    try:
        return metadata.version("c4jax")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _source_commit(package: Path | None = None) -> str | None:
    """The commit of the git checkout c4jax itself runs from, or None.

    None for an installed package (site-packages), even one inside a user's own git
    repository (a virtual environment in a project folder): only a checkout whose
    top level holds this very package and c4jax's pyproject.toml counts, never the
    working directory's repository.

    Args:
      package: the c4jax package directory (default: this module's).
    """
    package = Path(__file__).resolve().parent if package is None else package.resolve()
    root = package.parent
    pyproject = root / "pyproject.toml"
    try:
        if not pyproject.is_file() or 'name = "c4jax"' not in pyproject.read_text():
            return None
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
            timeout=10, cwd=root,
        )
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
            return None
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=root
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() or None


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
    net.add_argument("run", help="RUN_DIR or RUN_DIR:STEP (STEP: an iteration, last or best; "
                     "default: the best)")
    net.add_argument("out_dir", help="directory to write (created if needed)")
    net.add_argument("--note", default="", help="free text kept in info.json")
    net.add_argument(
        "--results", default=None, help="a JSON file (e.g. evaluate --json) kept in info.json"
    )
    web = sub.add_parser(
        "web", help="a static page (index.html + ONNX model) that plays the network in a browser"
    )
    web.add_argument("out_dir", help="directory to write (created if needed)")
    web.add_argument(
        "--run", default=None,
        help="RUN_DIR or RUN_DIR:STEP (STEP: an iteration, last or best; default: the best); "
        "default: the pretrained agent",
    )
    web.add_argument(
        "--ort-dir", default=None,
        help="onnxruntime-web's dist/ (or a node_modules or npm prefix holding it); default: "
        "installed with npm into ~/.cache/c4jax the first time",
    )
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()
    if args.command == "web":
        return _web(args)

    try:
        run, step = _run_and_step(args.run)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    results = None
    if args.results:
        try:
            results = json.loads(Path(args.results).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            print(f"error: --results {args.results}: {err}", file=sys.stderr)
            return 2
    try:
        restored = checkpoints.restore_variables(run, step)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    info = {
        "source_run": Path(run).name,
        "c4jax_version": _version(),
        "commit": _source_commit(),
        "training_seconds": _wall_time(Path(run), restored.step),
        "exported": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "note": args.note,
        "results": results,
    }
    try:
        out = exported.export_network(restored, args.out_dir, info)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {args.out_dir}: {err}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {out} (step {restored.step}, {size / 1024:.0f} KB)")
    return 0


def _run_and_step(spec: str) -> tuple[str, int | None]:
    """``RUN_DIR`` or ``RUN_DIR:STEP`` as the loaders take it: the run, and its STEP (an
    iteration, ``last``: the newest checkpoint's, or None for ``best`` or none given:
    the loaders' default, the best checkpoint). As in agent specs, a directory whose
    name holds ``:`` is the run, and otherwise STEP follows the last ``:``.

    Raises:
        ValueError: an empty STEP, one not a whole number up to ``inputs.MAX_STEP``
            (``InputError``), or ``last`` of a directory without checkpoints.
    """
    try:
        whole = Path(spec).is_dir()
    except (OSError, ValueError):  # a name the system cannot look up: no directory
        whole = False
    run, colon, step_text = ("", "", "") if whole else spec.rpartition(":")
    if not colon:
        return spec, None
    if step_text in inputs.STEP_WORDS:
        return run, registry.resolve_step(run, step_text)
    return run, inputs.parse_count(step_text, name=f"{spec}: STEP", high=inputs.MAX_STEP)


def _web(args: argparse.Namespace) -> int:
    """The ``web`` subcommand; returns the exit code."""
    try:
        import onnx  # noqa: F401

        from c4jax.web import onnx as onnx_export
    except ImportError as err:
        print(
            f"error: the web export needs {err.name or 'onnx'}: pip install 'c4jax[export]'",
            file=sys.stderr,
        )
        return 2
    try:
        if args.run is None:
            checkpoint, source = exported.load_exported(), "the pretrained agent"
        else:
            run, step = _run_and_step(args.run)
            checkpoint = checkpoints.restore_variables(run, step)
            source = f"run {Path(run).resolve().name}"
        ort_dir = onnx_export.ort_dist(args.ort_dir)
        out = onnx_export.write_web_page(checkpoint, args.out_dir, ort_dir, source)
    except (ValueError, onnx_export.OrtWebUnavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {args.out_dir}: {err}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(
        f"wrote {out} ({source}, step {checkpoint.step}, {size / 2**20:.1f} MB): serve it with "
        f"any static file server, e.g. python3 -m http.server -d {out}, and open it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
