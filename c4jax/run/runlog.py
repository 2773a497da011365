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

Writing never blocks and never fails in the dark: both files are written in the
calling thread and flushed every iteration (no writer thread that could die on a
full disk and leave ``log`` waiting on its queue), and a write that fails raises
an ``OSError`` naming the file. ``metrics.jsonl`` is only ever appended to or
replaced whole (``outputs.write_whole``); one deleted or replaced during the run
is written again, with every line logged so far, and a ``warning``.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Literal

from c4jax.store import outputs

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


def resolve_mode(progress: bool | Mode | None) -> Mode:
    """A trainer's ``progress`` argument as a mode: True is ``default_mode()``, False
    or None ``off``.

    Raises:
        ValueError: anything else (``"verbose"``, ``1``), naming ``progress``.
    """
    if progress is True:
        return default_mode()
    if progress is False or progress is None:
        return "off"
    if isinstance(progress, str) and progress in ("bar", "lines", "off"):
        return progress
    raise ValueError(f"progress: got {progress!r}, allowed: True, False, 'bar', 'lines'"
                     " or 'off'")


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


def _step_of(line: str) -> float | None:
    """The step of a metrics.jsonl line; None for a line that is not a record (torn
    by a crash while it was written, or damaged on the disk)."""
    try:
        step = json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError, IndexError):
        return None
    return step if isinstance(step, int | float) and not isinstance(step, bool) else None


def _kept_lines(text: str, initial: int, path: Path) -> list[str]:
    """The lines of a metrics.jsonl to keep when a run resumes from step ``initial``:
    the records up to it. A last line that is not a record was being written when
    the run stopped and is dropped; any other is damage (a flipped bit), kept as it
    is with a warning, so that no iteration's record is lost silently."""
    lines = text.splitlines()
    kept = []
    for number, line in enumerate(lines, start=1):
        step = _step_of(line)
        if step is None:
            if number == len(lines):
                continue
            warnings.warn(f"{path}: line {number} is not a JSON record (damaged?); kept as "
                          "it is", stacklevel=3)
            kept.append(line)
        elif step <= initial:
            kept.append(line)
    return kept


def _encoded(text: str) -> bytes:
    """``text`` as the bytes it was read from (undecodable bytes of a damaged line,
    read with ``surrogateescape``, are written back as they were)."""
    return text.encode("utf-8", "surrogateescape")


def _named(err: OSError, path: Path | str) -> OSError:
    """``err`` as an OSError that names ``path`` (Python's flush and write errors do not)."""
    if err.filename:
        return err
    return OSError(err.errno, err.strerror or str(err), str(path))


class _EventFile:
    """A TensorBoard event file written in the calling thread.

    tensorboardX's ``SummaryWriter`` hands events to a writer thread through a
    queue of ten: when that thread dies (a full disk), the eleventh event waits
    for good. Here every write and flush happens in the caller, and its failure
    is an ``OSError`` naming the file. ``purge_step``: TensorBoard drops the
    events of the steps from it on written by an earlier process (a resume).
    """

    def __init__(self, logdir: Path, purge_step: int | None):
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog

        self._event = Event
        self.path = Path(logdir)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._writer = EventsWriter(str(self.path / "events"))  # its first event
        except OSError as err:
            raise _named(err, self.path) from None
        self.path = Path(getattr(self._writer, "_file_name", self.path))
        if purge_step is not None:
            self._write(Event(step=purge_step, file_version="brain.Event:2"))
            self._write(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))
        self.flush()

    def _write(self, event) -> None:
        try:
            self._writer.write_event(event)
        except OSError as err:
            raise _named(err, self.path) from None

    def scalars(self, step: int, metrics: dict[str, float]) -> None:
        """One scalar event per metric at ``step``, then a flush."""
        from tensorboardX.summary import scalar

        now = time.time()
        for name, value in metrics.items():
            self._write(self._event(summary=scalar(name, value), wall_time=now, step=int(step)))
        self.flush()

    def flush(self) -> None:
        try:
            self._writer.flush()
        except OSError as err:
            raise _named(err, self.path) from None

    def close(self) -> None:
        try:
            self._writer.close()
        except OSError as err:
            raise _named(err, self.path) from None


class RunLog:
    """metrics.jsonl, TensorBoard event files and the progress display of one run.

    Raises (``__init__``, ``log``, ``close``):
        OSError: a file could not be written (a full disk, a read-only file);
            ``filename`` names it.
    """

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
        self.total = total
        self.mode = mode
        self._stream = sys.stderr if stream is None else stream
        self._columns = columns
        self._first = True  # the next iteration includes compiling
        self._times: list[float] = []
        # A resumed run repeats the steps after its last checkpoint: drop their
        # old records so each step is logged once (purge_step does it for TB).
        # Every line of the file, kept to write it again if it vanishes.
        self._path = Path(workdir) / "metrics.jsonl"
        self._lines: list[str] = []
        self._jsonl = None
        self._tb = None
        self._bar = None
        self._failed = False
        try:
            if self._path.exists():
                text = self._path.read_bytes().decode("utf-8", "surrogateescape")
                self._lines = _kept_lines(text, initial, self._path)
                if text != self._text():  # replaced whole: a full disk leaves the old file
                    self._write_whole()
            self._open()
            self._tb = _EventFile(Path(workdir) / "tb", initial + 1 if initial else None)
        except OSError as err:
            self._failed = True
            self._close_files()
            raise _named(err, self._path) from None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, initial=initial, unit="it", file=self._stream,
                ncols=columns, dynamic_ncols=columns is None,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )

    def _text(self) -> str:
        return "".join(line + "\n" for line in self._lines)

    def _write_whole(self) -> None:
        """Replaces metrics.jsonl by the lines kept, whole or not at all."""
        text = self._text()
        outputs.write_whole(self._path, lambda tmp: tmp.write_bytes(_encoded(text)))

    def _open(self) -> None:
        """Opens metrics.jsonl for appending and remembers which file it is."""
        self._jsonl = self._path.open("a")
        stat = os.fstat(self._jsonl.fileno())
        self._identity = (stat.st_dev, stat.st_ino)

    def _still_there(self) -> bool:
        """Whether metrics.jsonl is still the file opened (not deleted or replaced)."""
        try:
            stat = os.stat(self._path)
        except FileNotFoundError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def _restore_file(self) -> None:
        """Writes metrics.jsonl again, whole, after it vanished, and says so."""
        with contextlib.suppress(OSError):
            self._jsonl.close()
        self._write_whole()
        self._open()
        warnings.warn(
            f"{self._path} was deleted or replaced during the run: wrote it again with "
            f"the {len(self._lines)} lines logged so far",
            stacklevel=4,  # the caller of log()
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

    def note(self, message: str) -> None:
        """A line of text during the run: above the bar (which stays whole), or printed
        in ``lines`` mode; nothing in ``off`` mode."""
        if self._bar is not None:
            self._bar.write(message, file=self._stream)
        elif self.mode == "lines":
            print(message, flush=True)

    def set_total(self, total: int) -> None:
        """The run's length changed (a time budget planned it again): the lines, the
        bar and the ETA count to ``total`` from now on."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def eta(self, step: int) -> float | None:
        """Seconds left, from the recent post-compile iterations (None before any)."""
        if not self._times:
            return None
        return statistics.fmean(self._times[-_RECENT:]) * (self.total - step)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Records iteration ``step``'s metrics everywhere and advances the display."""
        self._write(step, metrics)
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

    def _write(self, step: int, metrics: dict[str, float]) -> None:
        """Appends the metrics to metrics.jsonl and the event file, both flushed."""
        line = json.dumps({"step": step, **metrics})
        try:
            if not self._still_there():
                self._restore_file()
            self._lines.append(line)
            try:
                self._jsonl.write(line + "\n")
                self._jsonl.flush()
            except OSError as err:
                raise _named(err, self._path) from None
            self._tb.scalars(step, metrics)
        except OSError:
            self._failed = True
            raise

    def _close_files(self) -> OSError | None:
        """Closes both files; the first failure, or None."""
        first = None
        for file in (self._tb, self._jsonl):
            if file is None:
                continue
            try:
                file.close()
            except OSError as err:
                first = first or _named(err, self._path)
        self._tb = self._jsonl = None
        return first

    def close(self) -> None:
        """Closes the bar and the files. A failure to write the last lines raises an
        OSError, unless an earlier write already failed (that one was raised)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        failure = self._close_files()
        if failure is not None and not self._failed:
            self._failed = True
            raise failure
