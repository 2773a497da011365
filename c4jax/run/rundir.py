"""The run directory: checked before anything compiles, locked while a trainer uses it.

    rundir.check_ours(Path("runs/x"), not_a_config)  # ValueError: someone else's files
    workdir = rundir.prepare(Path("runs/x"))       # ValueError naming the path
    with rundir.lock(workdir):                     # ValueError naming the holder
        ...
    rundir.write_atomic(workdir / "config.json", text)  # whole or not at all

*A c4jax run* is a directory whose ``config.json`` reads as a c4jax configuration
(``not_a_config`` says so; a trainer writes it before anything else it keeps). A
directory a trainer may use is a missing or empty one, a run, or one holding
only what a trainer creates before its ``config.json`` (the lock, an empty
``checkpoints/``); ``check_ours`` refuses any other, so that a ``--workdir``
typed wrong never has its ``config.json`` or ``metrics.jsonl`` rewritten. An
exported network's folder (``c4jax.export network``, the shipped ``pretrained``)
has a c4jax ``config.json`` too, and is refused as well: rewriting that file
would break the folder's checksums.

Only the standard library (and ``c4jax.store.outputs``, which needs no more): a
command line can check its paths before JAX loads.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from c4jax.store import outputs

LOCK_FILE = ".lock"  # holds "pid host start-time" of the trainer using the directory
# The file that marks an exported network's folder (``c4jax.store.exported.VARIABLES_FILE``;
# named again here so that this module needs no JAX): such a folder also has a
# c4jax config.json, but it is an agent, not a run to train on.
EXPORTED_VARIABLES = "variables.msgpack"
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
        try:
            a_file = part.exists() and not part.is_dir()
        except OSError as err:  # a folder above it this user may not open
            raise ValueError(f"{flag} {workdir}: cannot reach {part} ({_reason(err)})") from None
        if a_file:
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
    runs = [p for p in Path(runs_dir).glob("*")
            if (p / "config.json").is_file() and not (p / EXPORTED_VARIABLES).is_file()]
    if not runs:
        raise ValueError(f"--resume: no run directory with a config.json under {runs_dir}/")
    return max(runs, key=last_active)


def check_ours(workdir: Path, not_a_config: Callable[[Path], str | None],
               *, flag: str = "--workdir") -> None:
    """Refuses a ``workdir`` that holds files but is not a c4jax run (see the module).

    ``not_a_config(path)``: None when the file ``path`` reads as a c4jax
    configuration, else why not (one line).

    Raises:
        ValueError: one line naming the directory, why it is not a run (its
            ``config.json`` is not c4jax's, or it has none) and a few of its
            files, and the ways out: another directory, or ``--force-workdir``.
    """
    workdir = Path(workdir)
    if not workdir.is_dir():
        return  # missing (created later), or a file (prepare names it)
    config = workdir / "config.json"
    if (workdir / EXPORTED_VARIABLES).is_file():
        raise ValueError(
            f"{flag} {workdir}: an exported network ({EXPORTED_VARIABLES}), not a run "
            "directory; training would start from a new network and rewrite its config.json, "
            "so that it no longer loads. Give a new or empty directory, or add "
            "--force-workdir to use this one anyway"
        )
    if config.is_file():
        problem = not_a_config(config)
        if problem is None:
            return
        why = f"its {config.name} is not a c4jax configuration: {problem}"
    else:
        try:
            names = sorted(p.name for p in workdir.iterdir() if not _ours_before_config(p))
        except OSError:
            return  # unreadable: prepare says what is wrong with it
        if not names:
            return
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        why = f"it holds files ({shown}) but no config.json"
    raise ValueError(
        f"{flag} {workdir}: not a c4jax run directory ({why}); a trainer would overwrite "
        "its config.json and metrics.jsonl. Give a new or empty directory, or add "
        "--force-workdir to use this one anyway"
    )


def _ours_before_config(path: Path) -> bool:
    """Whether ``path`` is something a trainer creates before config.json (the lock,
    an empty checkpoints/)."""
    if path.name == LOCK_FILE:
        return path.is_file()
    if path.name == "checkpoints" and path.is_dir():
        try:
            return not any(path.iterdir())
        except OSError:
            return False
    return False


def write_atomic(path: Path, text: str) -> None:
    """Replaces ``path`` by a file holding ``text``, whole or not at all
    (``c4jax.store.outputs.write_text``: a temporary file beside it, flushed to the
    disk and renamed; on failure ``path`` is left as it was).

    Raises:
        OSError: with ``filename`` set to ``path``.
    """
    outputs.write_text(path, text)


def saved_steps(workdir: Path) -> list[int]:
    """The steps of the checkpoints saved whole in ``workdir/checkpoints`` (Orbax renames
    a checkpoint's folder to its step once it is written), oldest first."""
    try:
        names = [p.name for p in (Path(workdir) / "checkpoints").iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted(int(name) for name in names if name.isdecimal() and name.isascii())
