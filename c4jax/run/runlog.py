"""What a training run writes as it goes: metrics.jsonl, TensorBoard, and progress.

Progress comes in three modes:

* ``bar``: a tqdm bar on stderr (a terminal), with an ETA of its own;
* ``lines``: one plain line per iteration on stdout (a log file, ``--no-progress``);
* ``off``: nothing (library calls, tests).

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
_RECENT = 20  # iterations the ETA averages over


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


def _step_of(line: str) -> float:
    """The step of a metrics.jsonl line; a torn (half-written) line counts as newest."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return float("inf")


class RunLog:
    """metrics.jsonl, TensorBoard event files and the progress display of one run."""

    def __init__(self, workdir: Path, total: int, initial: int, mode: Mode = "off"):
        from tensorboardX import SummaryWriter

        self.total = total
        self.mode = mode
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
                total=total, initial=initial, unit="it", dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )

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
        parts = [f"{label} {metrics[key]:{fmt}}" for key, label, fmt in _SHOWN if key in metrics]
        if "seconds" in metrics:
            parts.append(f"{metrics['seconds']:.1f} s/it")
        parts.append("eta " + (format_duration(eta) if eta is not None else "after compiling"))
        if self._bar is not None:
            self._bar.set_postfix_str(", ".join(parts))
            self._bar.update(1)
        elif self.mode == "lines":
            print(f"iteration {step}/{self.total}  " + "  ".join(parts), flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._tb.close()
        self._jsonl.close()
