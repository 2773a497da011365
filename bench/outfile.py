"""The benchmarks' output files: checked when the command line is read, written whole.

    parser.add_argument("--out", type=outfile.path_arg("--out"), required=True)
    ...                                   # minutes or hours of measuring
    outfile.write_json(args.out, record, name="--out")

A path that cannot be written (a folder, a read-only file, a folder that cannot
be made, a full disk) is refused by argparse before any work, as ``error:
argument --out: ...`` and exit status 2, not a traceback after the work. The
files are written by ``c4jax.store.outputs.write_output``: a temporary file
beside the target, synced and renamed over it, so an interrupted or failed
write leaves the old file as it was. If the file cannot be written after all
(the disk filled during the run), the record is printed on stdout instead, so
the measurement is not lost, and the command ends with the output error's
status.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from c4jax.store import outputs


def path_arg(name: str, *suffixes: str) -> Callable[[str], Path]:
    """An argparse ``type`` for the output path of ``name`` (``--out``).

    With ``suffixes`` (``".json", ".png"``), the path is given without its suffix
    and each ``path.with_suffix(s)`` is checked, as the command writes them.
    """

    def parse(text: str) -> Path:
        path = Path(text)
        for target in [path.with_suffix(s) for s in suffixes] or [path]:
            try:
                outputs.check_output(target, name=name)
            except outputs.OutputError as err:
                raise argparse.ArgumentTypeError(
                    str(err).removeprefix(f"{name}: ")) from None
        return path

    return parse


def write_json(path: Path, record: Any, *, name: str, indent: int = 2,
               default: Callable[[Any], Any] | None = None, lines: bool = False) -> Path:
    """Writes ``record`` as JSON to ``path`` whole (its folder made if missing).

    ``lines``: ``record`` is a list written one JSON object a line (a ``.jsonl``).
    If the file cannot be written, the text goes to stdout and the process exits
    with the error's status after one ``error:`` line on stderr.
    """
    if lines:
        text = "".join(json.dumps(row, default=default) + "\n" for row in record)
    else:
        text = json.dumps(record, indent=indent, default=default) + "\n"
    try:
        return outputs.write_output(path, lambda tmp: tmp.write_text(text), name=name)
    except outputs.OutputError as err:
        sys.stdout.write(text)
        sys.stdout.flush()
        print(f"error: {err}; the results are printed above", file=sys.stderr)
        raise SystemExit(err.code) from None


def save_figure(fig, path: Path, *, name: str, **kwargs) -> Path:
    """``fig.savefig(path)`` written whole (a figure that cannot be saved is one
    ``error:`` line and the error's exit status)."""
    try:
        return outputs.write_output(
            path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip(".") or "png",
                                          **kwargs), name=name)
    except outputs.OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(err.code) from None
