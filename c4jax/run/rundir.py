"""The run directory: checked before anything compiles, locked while a trainer uses it.

    workdir = rundir.prepare(Path("runs/x"))       # ValueError naming the path
    with rundir.lock(workdir):                     # ValueError naming the holder
        ...

Only the standard library: a command line can check its paths before JAX loads.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = ".lock"  # holds "pid host start-time" of the trainer using the directory
# Files whose modification time says when a run was last active.
_ACTIVITY = ("metrics.jsonl", "config.json", "checkpoints")


def _reason(err: OSError) -> str:
    return err.strerror or errno.errorcode.get(err.errno or 0, type(err).__name__)


def prepare(workdir: Path, *, flag: str = "--workdir") -> Path:
    """Creates ``workdir`` (with parents) and checks that files can be written there.

    Raises:
        ValueError: one line naming the path that is the problem: a regular file
            in the way, a parent or the directory that is not writable, a path
            too long, a read-only file system.
    """
    workdir = Path(workdir)
    for part in [workdir, *workdir.parents]:
        if part.exists() and not part.is_dir():
            where = "exists and" if part == workdir else f"lies below {part}, which"
            raise ValueError(f"{flag} {workdir}: {where} is a file, not a directory")
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        culprit = Path(err.filename) if err.filename else workdir
        raise ValueError(f"{flag} {workdir}: cannot create {culprit} ({_reason(err)})") from None
    try:
        with tempfile.NamedTemporaryFile(dir=workdir, prefix=".write-test-"):
            pass
    except OSError as err:
        raise ValueError(f"{flag} {workdir}: cannot write there ({_reason(err)})") from None
    return workdir


def _holder(path: Path) -> str:
    try:
        text = path.read_text().split()
    except OSError:
        return "another process"
    if len(text) >= 3:
        return f"process {text[0]} on {text[1]} (since {text[2]})"
    return "another process"


@contextlib.contextmanager
def lock(workdir: Path) -> Iterator[Path]:
    """Holds an exclusive lock on ``workdir`` for as long as the block runs.

    An ``flock`` on ``workdir/.lock``: the kernel drops it when the holder
    exits in any way (``kill -9`` included), so a stale lock never blocks.

    Raises:
        ValueError: another process holds it; the message names that process.
    """
    path = Path(workdir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"{workdir} is in use by {_holder(path)}; stop that trainer first, "
                "or use another --workdir"
            ) from None
        started = datetime.datetime.now().isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()} {started}\n".encode())
        yield path
    finally:
        os.close(fd)  # releases the lock


def last_active(run: Path) -> float:
    """When ``run`` was last written to (the newest of its log, config and checkpoints)."""
    times = [(run / name).stat().st_mtime for name in _ACTIVITY if (run / name).exists()]
    return max(times, default=run.stat().st_mtime)


def newest_run(runs_dir: Path) -> Path:
    """The run under ``runs_dir`` written to most recently (not the alphabetically last).

    Raises:
        ValueError: there is none.
    """
    runs = [p for p in Path(runs_dir).glob("*") if (p / "config.json").is_file()]
    if not runs:
        raise ValueError(f"--resume: no run directory with a config.json under {runs_dir}/")
    return max(runs, key=last_active)
