"""What a training run writes as it goes: metrics.jsonl, TensorBoard, and progress.

Progress comes in three modes:

* ``bar``: a tqdm bar on stderr (a terminal), with an ETA of its own;
* ``lines``: one plain line per iteration on stdout (a log file, ``--no-progress``);
* ``off``: nothing (library calls, tests).

The bar fits the terminal's width: the seconds per iteration and the ETA come
first, then as many metrics as fit, the loss and the evaluation results before
the others (the lines and metrics.jsonl have them all).


The ETA uses only the iterations after the first one of this process, which
includes compiling the step (about two minutes for the ``cpu`` preset) and
would inflate it.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Literal

Mode = Literal["bar", "lines", "off"]
_SHOWN = (  # (metric, label, format) shown in the bar and the lines
    ("loss", "loss", ".3f"),
    ("policy_entropy", "entropy", ".2f"),
    ("game_length", "length", ".1f"),
    ("epsilon", "epsilon", ".2f"),  # value-based runs
    ("win_rate/random", "vs random", ".2f"),
    ("win_rate/win-if-you-can", "vs win-if-you-can", ".2f"),
    ("win_rate/lookahead", "vs lookahead", ".2f"),
    ("mistake_rate", "mistakes", ".3f"),
)
_BAR_PRIORITY = (  # which metrics the bar keeps first when not all fit
    "loss", "mistake_rate", "win_rate/lookahead", "epsilon", "win_rate/win-if-you-can",
    "win_rate/random", "policy_entropy", "game_length",
)
_RECENT = 20  # iterations the ETA averages over
_MIN_BAR = 10  # columns the bar itself keeps, however many fields there are


def default_mode() -> Mode:
    """``bar`` when stderr is a terminal (of known width), else ``lines``."""
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return "lines"
    return "bar" if sys.stderr.isatty() and width > 0 else "lines"


def format_duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``1 h 05 min``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _fit(first: list[str], fields: dict[str, str], room: int) -> str:
    """``first`` (always), then those of ``fields`` (metric -> text) that still fit in
    ``room`` columns, taken in ``_BAR_PRIORITY`` order and shown in ``_SHOWN``
    order, joined by ``", "``."""
    used = len(", ".join(first))
    kept = set()
    for key in sorted(fields, key=_BAR_PRIORITY.index):
        if used + 2 + len(fields[key]) <= room:
            kept.add(key)
            used += 2 + len(fields[key])
    return ", ".join(first + [text for key, text in fields.items() if key in kept])


def _step_of(line: str) -> float:
    """The step of a metrics.jsonl line; a torn (half-written) line counts as newest."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return float("inf")


class RunLog:
    """metrics.jsonl, TensorBoard event files and the progress display of one run."""

    def __init__(
        self,
        workdir: Path,
        total: int,
        initial: int,
        mode: Mode = "off",
        *,
        stream=None,
        columns: int | None = None,
    ):
        """``stream``: where the bar goes (stderr); ``columns``: its width (default the
        terminal's, followed as it changes)."""
        from tensorboardX import SummaryWriter

        self.total = total
        self.mode = mode
        self._stream = sys.stderr if stream is None else stream
        self._columns = columns
        self._first = True  # the next iteration includes compiling
        self._times: list[float] = []
        # A resumed run repeats the steps after its last checkpoint: drop their
        # old records so each step is logged once (purge_step does it for TB).
        path = Path(workdir) / "metrics.jsonl"
        if path.exists():
            kept = [line for line in path.read_text().splitlines() if _step_of(line) <= initial]
            path.write_text("".join(line + "\n" for line in kept))
        self._jsonl = path.open("a")
        purge = initial + 1 if initial else None
        self._tb = SummaryWriter(str(Path(workdir) / "tb"), purge_step=purge)
        self._bar = None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, initial=initial, unit="it", file=self._stream,
                ncols=columns, dynamic_ncols=columns is None,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )

    def _width(self) -> int:
        """The bar's width in columns: the given one, else the terminal's (80 if unknown)."""
        if self._columns is not None:
            return self._columns
        try:
            return os.get_terminal_size(self._stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            return 80

    def _postfix_room(self) -> int:
        """Columns left for the bar's postfix: all but ``100%|`` + the bar's minimum +
        ``| 280/280 [1:23:45``, ``", "`` and ``]``."""
        total = str(self.total)
        fixed = len(f"100%|| {total}/{total} [00:00:00, ]") + _MIN_BAR
        return self._width() - fixed

    def compiling(self, message: str) -> None:
        """Says that the next iteration compiles first (shown in every mode but ``off``)."""
        if self._bar is not None:
            self._bar.set_postfix_str(message)
            self._bar.refresh()
        elif self.mode == "lines":
            print(message, flush=True)

    def eta(self, step: int) -> float | None:
        """Seconds left, from the recent post-compile iterations (None before any)."""
        if not self._times:
            return None
        return statistics.fmean(self._times[-_RECENT:]) * (self.total - step)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Records iteration ``step``'s metrics everywhere and advances the display."""
        self._jsonl.write(json.dumps({"step": step, **metrics}) + "\n")
        self._jsonl.flush()
        for name, value in metrics.items():
            self._tb.add_scalar(name, value, step)
        if not self._first and "seconds" in metrics:
            self._times.append(metrics["seconds"])
        self._first = False
        eta = self.eta(step)
        fields = {
            key: f"{label} {metrics[key]:{fmt}}" for key, label, fmt in _SHOWN if key in metrics
        }
        timing = [f"{metrics['seconds']:.1f} s/it"] if "seconds" in metrics else []
        timing.append("eta " + (format_duration(eta) if eta is not None else "after compiling"))
        if self._bar is not None:  # timing first: the fields that do not fit are left out
            self._bar.set_postfix_str(_fit(timing, fields, self._postfix_room()))
            self._bar.update(1)
        elif self.mode == "lines":
            parts = [*fields.values(), *timing]
            print(f"iteration {step}/{self.total}  " + "  ".join(parts), flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._tb.close()
        self._jsonl.close()
