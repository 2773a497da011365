"""Telling a damaged Orbax checkpoint from one of another version, and quietly.

``check_damage`` looks for missing or empty files without Orbax;
``stored_tree_fits`` compares the tree a checkpoint describes with the wanted
one; ``short_error`` reduces Orbax's and TensorStore's many-line errors to one
short line; ``quiet_orbax_leftovers`` keeps the asyncio leftovers of a failed
restore or save off stderr. ``c4jax.store.checkpoints`` uses them to fall back past damage.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path

import jax
import orbax.checkpoint as ocp

from c4jax.store import integrity


class DamagedCheckpointWarning(UserWarning):
    """A damaged checkpoint was skipped; an older good one is used instead."""


class DamagedCheckpointError(ValueError):
    """A checkpoint that cannot be read back: a file of it is missing, empty or unreadable."""

    def __init__(self, directory: Path, step: int, reason: str):
        super().__init__(f"checkpoint {step} in {directory} is damaged ({reason})")
        self.step = step
        self.reason = reason


# The files of a checkpoint that reading it back needs, as Orbax 0.12 writes
# them on a local disk. Others that it writes (commit_success.txt,
# state/_sharding, state/array_metadatas/, state/ocdbt.process_0/manifest.ocdbt)
# are not needed to restore, and which of them exist depends on the Orbax version.
_NEEDED_DIRS = ("state", "config")
_NEEDED_FILES = (
    "_CHECKPOINT_METADATA",
    "config/metadata",
    "state/_METADATA",
    "state/manifest.ocdbt",
)
# JSON items a checkpoint has only since some c4jax version (the checksums of its
# arrays): needed when its _CHECKPOINT_METADATA lists them, so that deleting one
# does not pass the checkpoint off as an older one.
_LISTED_JSON_ITEMS = ("checksums",)


def check_damage(directory: Path, step: int) -> str | None:
    """A cheap look at checkpoint ``step`` in a run's ``checkpoints/``, without Orbax.

    Returns:
        What is wrong in a few words ("state/_METADATA is missing", "an empty
        data file: state/d/...") or None when nothing obvious is. A truncated
        (not emptied) data file is only found by reading it.
    """
    step_dir = Path(directory) / str(step)
    if not step_dir.is_dir():
        return "its directory is missing"
    for name in _NEEDED_DIRS:
        if not (step_dir / name).is_dir():
            return f"{name}/ is missing"
    needed = list(_NEEDED_FILES)
    needed += [f"{name}/metadata" for name in _LISTED_JSON_ITEMS if name in _listed_items(step_dir)]
    for name in needed:
        path = step_dir / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size == 0:
            return f"{name} is empty"
    state_dir = step_dir / "state"
    for folder in [state_dir / "d", *sorted(state_dir.glob("ocdbt.process_*/d"))]:
        if not folder.is_dir():
            continue
        for data in sorted(folder.iterdir()):
            if data.is_file() and data.stat().st_size == 0:
                return f"an empty data file: {data.relative_to(step_dir)}"
    return None


def _listed_items(step_dir: Path) -> tuple[str, ...]:
    """The items that ``_CHECKPOINT_METADATA`` says the checkpoint holds (``()`` if
    it cannot be read: Orbax's own read of it says what is wrong)."""
    try:
        listed = json.loads((step_dir / "_CHECKPOINT_METADATA").read_text())["item_handlers"]
        return tuple(listed) if isinstance(listed, dict) else ()
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def stored_tree_fits(step_dir: Path, target, *, partial: bool) -> bool | None:
    """Whether the tree stored in ``step_dir/state`` (its ``_METADATA``) fits ``target``.

    Leaves are compared by path (key names only: Orbax stores dataclasses and
    tuples as dicts) and shape; ``partial``: ``target`` may be a part of it.
    None when the stored tree cannot be read.
    """
    handler = ocp.StandardCheckpointHandler()
    try:
        stored = _leaf_shapes(handler.metadata(step_dir / "state"))
    except Exception:
        return None
    finally:
        handler.close()
    wanted = _leaf_shapes(target)
    if not partial and set(stored) != set(wanted):
        return False
    return all(stored.get(path) == shape for path, shape in wanted.items())


def _leaf_shapes(tree) -> dict[tuple[str, ...], tuple[int, ...]]:
    def name(key) -> str:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                return str(getattr(key, attr))
        return str(key)

    return {
        tuple(name(k) for k in path): tuple(getattr(leaf, "shape", ()))
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
    }


_STATUS = re.compile(r"[A-Z][A-Z_]{3,}: ")  # TensorStore's status codes: NOT_FOUND: ...


def short_error(err: BaseException, step_dir: Path | None = None) -> str:
    """The first meaningful line of ``err`` (or of the TensorStore error under it), short."""
    chain: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in chain and len(chain) < 16:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    # Orbax wraps TensorStore's errors in a generic one that prints a spec of
    # many lines; the deepest error with a status code says what went wrong.
    best = next((e for e in reversed(chain) if _STATUS.match(str(e).strip())), err)
    text = str(best).strip()
    if isinstance(best, KeyError) and len(best.args) == 1:
        text = str(best.args[0])
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.split(" See full TensorStore details")[0]
    line = re.sub(r'Error opening "\w+" driver: ', "", line)
    line = re.sub(r' in OCDBT database at local file "[^"]*"', "", line)
    if step_dir is not None:
        line = line.replace(f"{Path(step_dir).absolute()}/", "")
    if not _STATUS.match(line):
        line = f"{type(best).__name__}: {line}" if line else type(best).__name__
    return line if len(line) <= 150 else line[:147] + "..."


def all_damaged_error(directory: Path, skipped: list[tuple[int, str]]) -> ValueError:
    listing = "; ".join(f"{step}: {reason}" for step, reason in skipped)
    return ValueError(
        f"every checkpoint in {directory} is damaged ({listing}); to start over, move "
        f"{directory} aside (or train in a new --workdir); to play, pick another run"
    )


def move_aside(step_dir: Path, quarantine: Path) -> Path:
    """Moves ``step_dir`` into ``quarantine`` (as its name, else NAME-1, NAME-2, ...)."""
    quarantine = Path(quarantine)
    quarantine.mkdir(parents=True, exist_ok=True)
    target = quarantine / step_dir.name
    suffix = 0
    while target.exists():
        suffix += 1
        target = quarantine / f"{step_dir.name}-{suffix}"
    shutil.move(str(step_dir), str(target))
    return target


def quiet_orbax_leftovers() -> None:
    """Keeps Orbax's asyncio leftovers of a failed restore or save off stderr.

    When one array of a restore or a save fails (a flipped bit, a full disk),
    Orbax closes its event loop while TensorStore still reads or writes the
    others. As each one ends, TensorStore's callback calls
    ``loop.call_soon_threadsafe`` on the closed loop, and the pending Orbax
    coroutines raise again when they are garbage collected; both go to
    ``sys.unraisablehook`` (tracebacks on stderr, from TensorStore's threads,
    possibly in the middle of the line that reports the failure or long after
    it). This installs (once) a hook that drops exactly those two kinds and
    passes everything else on to the hook before it.
    """
    previous = sys.unraisablehook
    if getattr(previous, "_c4jax_orbax_leftovers_filter", False):
        return

    def hook(unraisable) -> None:
        if not _is_orbax_leftover(unraisable):
            previous(unraisable)

    hook._c4jax_orbax_leftovers_filter = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
    # The failed reads' tasks also end up in asyncio's "Task exception was
    # never retrieved" log records.
    logging.getLogger("asyncio").addFilter(_drop_orbax_task_leftovers)


def _drop_orbax_task_leftovers(record: logging.LogRecord) -> bool:
    """A ``logging`` filter: False (drop) for asyncio's report of an Orbax read task
    whose exception nobody retrieved (the restore already failed and said why)."""
    if "exception was never retrieved" not in str(record.msg):
        return True
    exc = record.exc_info[1] if record.exc_info else None
    if exc is None:
        return True
    if any(mark in str(exc) for mark in ("tensorstore_spec", "OCDBT database")):
        return False  # a TensorStore read error (a bare Future has no traceback)
    tb = exc.__traceback__
    while tb is not None:
        if str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(_ORBAX_DIR):
            return False
        tb = tb.tb_next
    return True


_ORBAX_DIR = str(Path(ocp.__file__).resolve().parent)


def _is_orbax_leftover(unraisable) -> bool:
    """An unraisable error left by a failed Orbax restore or save (see above)."""
    exc = unraisable.exc_value
    if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
        tb = unraisable.exc_traceback
        while tb is not None:
            if tb.tb_frame.f_code.co_name == "call_soon_threadsafe":
                return True
            tb = tb.tb_next
    code = getattr(unraisable.object, "cr_code", None)  # a coroutine being finalized
    return code is not None and str(Path(code.co_filename).resolve()).startswith(_ORBAX_DIR)


# The SHA-256 of every file of a committed checkpoint, as ``sha256sum`` writes them
# (``sha256sum -c files.sha256`` in the step folder checks them too).
FILE_DIGESTS = "files.sha256"
SEALED_ITEMS = ("state", "config", "checksums")  # the folders whose files it lists


def seal(step_dir: Path) -> None:
    """Writes ``step_dir/files.sha256``: the SHA-256 of every file of a committed
    checkpoint's items (atomically: a half-written list is never read).
    A missing ``step_dir`` (deleted since) is left alone.

    Raises:
        OSError: writing it failed (the partial list is removed).
    """
    step_dir = Path(step_dir)
    if not step_dir.is_dir():
        return
    lines = []
    for item in SEALED_ITEMS:
        for path in sorted((step_dir / item).glob("**/*")):
            if path.is_file():
                lines.append(f"{integrity.file_digest(path)}  {path.relative_to(step_dir)}\n")
    partial = step_dir / f"{FILE_DIGESTS}.partial"
    try:
        partial.write_text("".join(lines))
        os.replace(partial, step_dir / FILE_DIGESTS)
    except OSError:
        partial.unlink(missing_ok=True)
        raise


def check_files(step_dir: Path, items: tuple[str, ...] = SEALED_ITEMS) -> str | None:
    """What is wrong with the files of a sealed checkpoint (``seal``) in the folders
    ``items``, in a few words, or None (all match, or it was never sealed: an
    older c4jax, or a process stopped between the commit and the seal)."""
    listing = Path(step_dir) / FILE_DIGESTS
    if not listing.is_file():
        return None
    try:
        entries = [line.split("  ", 1) for line in listing.read_text().splitlines()]
    except (OSError, UnicodeDecodeError):
        return f"{FILE_DIGESTS} is unreadable"
    for entry in entries:
        if len(entry) != 2 or not re.fullmatch(r"[0-9a-f]{64}", entry[0]):
            return f"{FILE_DIGESTS} is unreadable"
        digest, name = entry
        if name.split("/", 1)[0] not in items:
            continue
        path = Path(step_dir) / name
        if not path.is_file():
            return f"{name} is missing"
        if integrity.file_digest(path) != digest:
            return f"{name} does not match its SHA-256 in {FILE_DIGESTS}: its data changed on disk"
    return None


_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")
_FAILED_PATH = re.compile(r'(?:Failed writing|local file|file): "([^"]+)"')


def os_error(err: BaseException) -> OSError | None:
    """The failure to write a file in ``err`` (or the errors under it) as an
    ``OSError`` with its ``errno`` and ``filename``, or None when it is none.

    Orbax raises TensorStore's write errors as a ValueError whose text holds
    the path and the system's error code (``[os_error_code='28']``).
    """
    chain: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in chain and len(chain) < 16:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for e in chain:
        if isinstance(e, OSError) and e.errno is not None:
            return e
    for e in chain:
        text = str(e)
        code = _OS_ERROR_CODE.search(text)
        if code is None and "No space left on device" in text:
            code_value = errno.ENOSPC
        elif code is None:
            continue
        else:
            code_value = int(code.group(1))
        paths = _FAILED_PATH.findall(text)
        return OSError(code_value, os.strerror(code_value), paths[-1] if paths else None)
    return None


_UNFINISHED = "*.orbax-checkpoint-tmp*"  # Orbax's folders of a save not yet committed


def remove_unfinished(directory: Path) -> list[Path]:
    """Removes the folders of unfinished saves in a run's ``checkpoints/`` (a failed
    or killed save's), so that nothing reads them; returns them."""
    removed = sorted(Path(directory).glob(_UNFINISHED))
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return removed
