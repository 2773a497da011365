"""JAX's persistent compilation cache for the command lines: compile once per machine.

    from c4jax.run import compile_cache
    compile_cache.enable()   # in a command's main(), before anything compiles

XLA compiles every jitted program (the training iteration, the searches of
``play``, ``evaluate`` and ``serve``) when a process first runs it: minutes on a
loaded 2-core CPU for the ``cpu`` and ``strong`` presets. With the cache on, a
program compiled once is read back from disk by every later process on the
machine: a resumed run, a second run of the same preset, an evaluation.

Where: ``$XDG_CACHE_HOME/c4jax/jax`` (``~/.cache/c4jax/jax`` by default), at
most ``MAX_BYTES`` (JAX evicts the least recently used entries beyond it).
JAX keys each entry by the program, the jax and jaxlib versions, the XLA flags
and the device, so one folder is safe across jax upgrades, backends and
settings: a changed one is a miss, never a wrong program. Delete the folder
to reclaim its space.

Not touched:

* ``C4JAX_COMPILE_CACHE=0`` turns it off;
* a cache the user chose (``JAX_COMPILATION_CACHE_DIR``, or
  ``jax_compilation_cache_dir`` set in code) is kept, and so is its size bound
  (it is repaired as below; JAX locks it only where it is bounded);
* a folder that cannot be created or written leaves it off (``enable``
  returns why; the trainer's start-up line, ``describe``, says so), rather
  than failing: the cache only saves time. JAX itself only warns when an entry cannot be
  written later (a full disk).

Repair. JAX writes an entry in place, so a process killed while it writes one
(SIGKILL, an out-of-memory kill) or a disk that fills up leaves a truncated
entry. JAX then warns on every later read of it, recompiles, and never writes it
again, because the entry exists. With a bounded cache every later write fails
as well, since JAX's eviction needs each entry's access time and a cut-short
write has none. So ``enable`` first checks the entries written since it last
looked (and, in a bounded cache, any entry without an access time) by
decompressing them with JAX's own reader. It removes
the ones that are cut short or corrupt, and gives a sound entry without an
access time one. It holds JAX's own lock on the folder while it does this
(where the cache is bounded, JAX locks it too). ``describe`` reports what it
removed.

Nothing happens at import. Library code never calls this: a program that uses
c4jax as a library decides its own cache (it may call this function too).
"""

from __future__ import annotations

import os
import tempfile
import time
import zlib
from pathlib import Path

import jax

OPT_OUT = "C4JAX_COMPILE_CACHE"  # "0" turns the cache off
MAX_BYTES = 2 * 1024**3  # JAX evicts the least recently used entries beyond this
ENTRY, ATIME = "-cache", "-atime"  # JAX's file suffixes: a compiled program, its last use
LOCK = ".lockfile"  # the lock file JAX's bounded cache takes for every read and write
CHECKED = ".c4jax-checked"  # when repair() last started (ns): older entries were checked
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # JAX compresses with zstd where it can, else with zlib

_repaired: dict[str, int] = {}  # folder -> entries the last enable() removed there


def default_dir(environ=None) -> Path:
    """``$XDG_CACHE_HOME/c4jax/jax``, or ``~/.cache/c4jax/jax``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "c4jax" / "jax"


def _opted_out(env) -> bool:
    return env.get(OPT_OUT, "1").strip().lower() in ("0", "false", "no", "off")


def _writable(folder: Path) -> str | None:
    """None if ``folder`` can be created and written, else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".c4jax-probe-"):
            pass
    except OSError as err:
        return f"{folder} is not writable ({err.strerror or err})"
    return None


def enable(environ=None, folder: Path | None = None) -> str:
    """Turns JAX's persistent compilation cache on in ``folder`` (``default_dir()``).

    Returns:
        ``"on: FOLDER"``, ``"set by the user: FOLDER"``, ``"opted out"``, or
        ``"off: REASON"`` when the folder cannot be written. The first two end in
        ``"; removed N damaged entries cut short or corrupt"`` when ``repair``
        removed some.
    """
    env = os.environ if environ is None else environ
    if _opted_out(env):
        return "opted out"
    chosen = jax.config.jax_compilation_cache_dir  # JAX_COMPILATION_CACHE_DIR lands here
    if chosen:
        return f"set by the user: {chosen}" + _repair_note(chosen)
    folder = default_dir(env) if folder is None else Path(folder)
    problem = _writable(folder)
    if problem is not None:
        return f"off: {problem}"
    jax.config.update("jax_compilation_cache_dir", str(folder))
    try:
        import filelock  # noqa: F401  (a dependency: JAX's eviction locks the folder with it)
    except ImportError:  # without it JAX cannot bound the size, and warns on every read
        return f"on: {folder}" + _repair_note(folder)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return f"on: {folder}" + _repair_note(folder)


def _repair_note(folder) -> str:
    bounded = jax.config.jax_compilation_cache_max_size != -1
    _repaired[str(folder)] = removed = repair(folder, bounded=bounded)
    return _removed(removed)


def _removed(n: int | None) -> str:
    """What enable() and describe() add when repair removed ``n`` entries ('' for none)."""
    return f"; removed {n} damaged entr{'y' if n == 1 else 'ies'} cut short or corrupt" if n else ""


def _decompresses(data: bytes) -> bool | None:
    """Whether a cache entry's bytes decompress whole as this JAX reads them (zstd where
    it has a zstd module, else zlib); None where that cannot be told."""
    try:  # JAX's own reader: what it cannot decompress, it cannot load either
        from jax._src.compilation_cache import decompress_executable
    except ImportError:  # moved in some later jax: check the zlib entries alone
        if data[:4] == ZSTD_MAGIC:
            return None
        decompress_executable = zlib.decompress
    try:
        decompress_executable(data)
    except Exception:  # each library has its own error type for a cut-short stream
        return False
    return True


def repair(folder, *, bounded: bool, lock_timeout: float = 10.0) -> int:
    """Removes the cache entries in ``folder`` that a killed write or a full disk cut short.

    Checks (decompresses) each entry written since the last repair of this folder
    began. Where ``bounded`` (JAX's size bound is on), it also checks each entry
    without an access-time file, gives a sound one the current time (JAX's
    eviction needs it), and holds JAX's lock on the folder meanwhile. Without the
    bound JAX takes no lock, so an entry another process is writing at that
    moment may be taken for cut short and removed; it is compiled again. A
    folder it cannot lock or read is left as it is.

    Returns:
        The number of entries removed.
    """
    if "://" in str(folder) or not Path(folder).is_dir():
        return 0  # a remote cache (gs://...) or none yet: nothing to repair here
    folder = Path(folder)
    lock = None
    if bounded:
        try:
            import filelock
        except ImportError:
            bounded = False
        else:
            lock = filelock.FileLock(folder / LOCK)
            try:
                lock.acquire(timeout=lock_timeout)
            except (filelock.Timeout, OSError):
                return 0  # another process holds it long; check next time
    try:
        return _repair(folder, bounded)
    except OSError:
        return 0  # a folder that cannot be read or written: JAX will only warn
    finally:
        if lock is not None:
            lock.release()


def _repair(folder: Path, bounded: bool) -> int:
    started = time.time_ns()
    stamp = folder / CHECKED
    try:
        since = int(stamp.read_text())
    except (OSError, ValueError):
        since = 0
    removed = 0
    for entry in folder.glob(f"*{ENTRY}"):
        atime = entry.with_name(entry.name.removesuffix(ENTRY) + ATIME)
        has_atime = atime.exists()
        if (has_atime or not bounded) and entry.stat().st_mtime_ns < since:
            continue  # checked before; an unbounded cache writes no access times
        if _decompresses(entry.read_bytes()) is False:
            entry.unlink(missing_ok=True)
            atime.unlink(missing_ok=True)
            removed += 1
        elif bounded and not has_atime:
            atime.write_bytes(time.time_ns().to_bytes(8, "little"))  # JAX's format
    partial = stamp.with_name(f"{CHECKED}.{os.getpid()}")
    partial.write_text(str(started))
    partial.replace(stamp)
    return removed


def describe(environ=None) -> str:
    """One start-up line: where JAX's compilation cache is, or that it is off."""
    env = os.environ if environ is None else environ
    folder = jax.config.jax_compilation_cache_dir
    if folder:
        repaired = _removed(_repaired.get(str(folder)))
        return (f"compilation cache: {folder} (programs compiled before on this machine "
                f"load from there; {OPT_OUT}=0 turns it off{repaired})")
    if _opted_out(env):
        return f"compilation cache: off ({OPT_OUT}=0)"
    return f"compilation cache: off ({default_dir(env)} cannot be written)"
