"""Telling a damaged Orbax checkpoint from one of another version, and quietly.

``check_damage`` looks for missing or empty files without Orbax;
``stored_tree_fits`` compares the tree a checkpoint describes with the wanted
one; ``short_error`` reduces Orbax's and TensorStore's many-line errors to one
short line; ``quiet_restore_leftovers`` keeps the asyncio leftovers of a failed
restore off stderr. ``c4jax.store.checkpoints`` uses them to fall back past damage.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
from pathlib import Path

import jax
import orbax.checkpoint as ocp


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
    for name in _NEEDED_FILES:
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


def quiet_restore_leftovers() -> None:
    """Keeps Orbax's asyncio leftovers of a failed restore off stderr.

    When one array of a restore fails, Orbax closes its event loop while
    TensorStore still reads the others. As each read ends, TensorStore's
    callback calls ``loop.call_soon_threadsafe`` on the closed loop, and the
    pending Orbax coroutines raise again when they are garbage collected; both
    go to ``sys.unraisablehook`` (tracebacks on stderr), possibly long after
    the restore has returned. This installs (once) a hook that drops exactly
    those two kinds and passes everything else on to the hook before it.
    """
    previous = sys.unraisablehook
    if getattr(previous, "_c4jax_restore_leftovers_filter", False):
        return

    def hook(unraisable) -> None:
        if not _is_restore_leftover(unraisable):
            previous(unraisable)

    hook._c4jax_restore_leftovers_filter = True  # type: ignore[attr-defined]
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


def _is_restore_leftover(unraisable) -> bool:
    """An unraisable error left by a failed Orbax restore (see above)."""
    exc = unraisable.exc_value
    if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
        tb = unraisable.exc_traceback
        while tb is not None:
            if tb.tb_frame.f_code.co_name == "call_soon_threadsafe":
                return True
            tb = tb.tb_next
    code = getattr(unraisable.object, "cr_code", None)  # a coroutine being finalized
    return code is not None and str(Path(code.co_filename).resolve()).startswith(_ORBAX_DIR)
