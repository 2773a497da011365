"""Output files: checked before the work starts, written whole or not at all.

    outputs.check_output(path, name="--json")     # before an hour of work, not after
    ...
    outputs.write_output(path, lambda tmp: tmp.write_text(text), name="--json")

``check_output`` and ``check_output_folder`` create the folder, write a small
probe file (a full disk refuses it) and remove both again: a check leaves
nothing behind. ``write_output`` and ``write_text`` fill a temporary file
beside the target, flush it to the disk and rename it over the target, so a
reader never sees half a file and a failure leaves the old one as it was (a
command's Ctrl-C included: ``remove_temporary``).

A path that cannot be written is one line naming it and saying why
(``OutputError``, a ValueError, with the exit status to end with: 2 for a path
that is wrong, ``EXIT_IO`` for a full disk). ``EXIT_IO`` (74, ``EX_IOERR`` of
sysexits.h) is the status of every command that stops because a file could not
be written: the trainers, ``evaluate`` and ``plot``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from c4jax import inputs

EXIT_IO = 74  # sysexits.h EX_IOERR: the disk is full or failing, not bad input
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
_PROBE_BYTES = 4096  # one page: a full disk refuses it


class OutputError(ValueError):
    """An output path that cannot be written: a one-line message and the exit status
    to end with (``code``: 2 for a path that is wrong, ``EXIT_IO`` for a full disk)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def _path(path: str | Path) -> str:
    """A path as a message shows it: quoted, in full unless absurdly long."""
    text = str(path)
    return repr(text) if len(text) <= 300 else inputs.shown(text)


def _why(err: OSError, path: Path) -> tuple[str, int]:
    """What an OSError on ``path`` means to a user, and the exit status."""
    if err.errno in _DISK_FULL:
        return (
            f"{err.strerror or err} (the disk is full or failing); free some space or"
            " give a path on another disk", EXIT_IO,
        )
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied; give a path you can write", 2
    if err.errno == errno.EROFS:
        return "a read-only file system; give a path on a writable one", 2
    if err.errno == errno.EISDIR:
        return "it is a folder; give a file path", 2
    if err.errno in (errno.ENOTDIR, errno.EEXIST):
        return "part of it is a file, not a folder; give a path in a folder", 2
    return f"{err.strerror or err}; give another path", 2


def _output_error(name: str, path: Path, err: OSError, note: str = "") -> OutputError:
    why, code = _why(err, path)
    return OutputError(f"{name}: cannot write {_path(path)}: {why}{note}", code)


def _probe(folder: Path) -> None:
    """Writes, syncs and removes a small file in ``folder``; raises OSError if it cannot."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".c4jax-probe-")
    try:
        os.write(fd, b"\0" * _PROBE_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _try_folder(folder: Path, file_name: str | None = None) -> None:
    """Creates ``folder`` (and its missing parents), writes a probe file in it (and
    creates ``file_name`` there if it does not exist, so that a name the file system
    refuses, too long say, is found now), and removes what it created: a check
    leaves nothing behind. Raises OSError."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _probe(folder)
        target = folder / file_name if file_name else None
        if target is not None and not target.exists():
            with open(target, "x"):
                pass
            target.unlink()
    finally:
        for created in missing:
            with contextlib.suppress(OSError):
                created.rmdir()


def check_output_folder(folder: str | Path, *, name: str) -> Path:
    """Before the work starts: ``folder`` can be created (if missing) and take a file.

    Args:
        folder: where outputs will go.
        name: what it is in the message (``--out``, ``plots folder``).

    Raises:
        OutputError: one line naming ``folder`` and why it cannot be written.
    """
    folder = Path(folder)
    try:
        _try_folder(folder)
    except FileExistsError as err:  # a file where the folder (or one above it) should be
        raise OutputError(
            f"{name}: cannot write {_path(folder)}:"
            f" {_path(err.filename or folder)} is a file; give a folder"
        ) from None
    except OSError as err:
        raise _output_error(name, folder, err) from None
    return folder


def check_output(path: str | Path, *, name: str) -> Path:
    """Before the work starts: the file ``path`` can be written (its folder can be
    created if missing; an existing file is replaced only at the end). Nothing is left
    behind: ``write_output`` creates the folder.

    Raises:
        OutputError: one line naming ``path`` and why it cannot be written.
    """
    path = Path(path)
    try:
        folder, exists = path.is_dir(), path.exists()  # OSError: a name too long, say
    except OSError as err:
        raise _output_error(name, path, err) from None
    if folder:
        raise OutputError(f"{name}: {_path(path)} is a folder; give a file path")
    if exists and not os.access(path, os.W_OK):
        raise OutputError(
            f"{name}: cannot write {_path(path)}: the file is read-only;"
            " give another path"
        )
    try:
        _try_folder(path.parent, path.name)
    except OSError as err:
        raise _output_error(name, path, err) from None
    return path


# The temporary files of the ``write_whole`` calls running now, for remove_temporary.
_writing: set[str] = set()
_writing_lock = threading.Lock()


@contextlib.contextmanager
def _temporary(path: Path):
    """Lists ``path`` for ``remove_temporary`` while the block runs."""
    with _writing_lock:
        _writing.add(str(path))
    try:
        yield
    finally:
        with _writing_lock:
            _writing.discard(str(path))


def remove_temporary() -> None:
    """Removes the temporary files of the ``write_whole`` calls running now (best
    effort; any thread). A command's Ctrl-C, SIGTERM or SIGHUP ends the process
    with ``os._exit`` (``run.interrupt.exit_now``), which skips the cleanup of
    ``write_whole``: that calls this first, so no temporary file is left behind."""
    if not _writing_lock.acquire(timeout=1.0):
        return
    try:
        names = list(_writing)
    finally:
        _writing_lock.release()
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(name)


def write_whole(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Replaces ``path`` whole or not at all: ``write(tmp)`` fills a temporary file
    beside it, which is flushed to the disk and renamed over ``path``. On any failure
    the temporary file is removed and ``path`` is left as it was.

    Raises:
        OSError: with ``filename`` set to ``path``.
    """
    path = Path(path)
    # A bounded name: the file's own may already be as long as the system allows.
    tmp = path.with_name(f".{path.name[:64]}.{os.getpid()}.tmp")
    try:
        # A command's Ctrl-C ends the process at once (run.interrupt.exit_now), past
        # the except below: it calls remove_temporary.
        with _temporary(tmp):
            write(tmp)
            with open(tmp, "rb+") as file:
                os.fsync(file.fileno())
            os.replace(tmp, path)
    except BaseException as err:  # a full disk, a failing writer, KeyboardInterrupt
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError):
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    """``write_whole`` of a text file (a run's ``config.json``, ``metrics.jsonl``)."""
    return write_whole(path, lambda tmp: tmp.write_text(text))


def write_output(
    path: str | Path, write: Callable[[Path], object], *, name: str, note: str = ""
) -> Path:
    """``write_whole`` for a command's output (its folder created if missing).

    ``name`` is what the path is in a message (``--json``); ``note`` ends the message
    (``; the results are printed above``).

    Raises:
        OutputError: one line naming ``path`` and why it could not be written.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, write)
    except OSError as err:
        raise _output_error(name, path, err, note) from None
    return path
