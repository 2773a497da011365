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
  ``jax_compilation_cache_dir`` set in code) is kept;
* a folder that cannot be created or written leaves it off (``enable``
  returns why; the trainer's start-up line, ``describe``, says so), rather
  than failing: the cache only saves time. JAX itself only warns when an entry cannot be
  written later (a full disk).

Nothing happens at import. Library code never calls this: a program that uses
c4jax as a library decides its own cache (it may call this function too).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import jax

OPT_OUT = "C4JAX_COMPILE_CACHE"  # "0" turns the cache off
MAX_BYTES = 2 * 1024**3  # JAX evicts the least recently used entries beyond this


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
        ``"off: REASON"`` when the folder cannot be written.
    """
    env = os.environ if environ is None else environ
    if _opted_out(env):
        return "opted out"
    chosen = jax.config.jax_compilation_cache_dir  # JAX_COMPILATION_CACHE_DIR lands here
    if chosen:
        return f"set by the user: {chosen}"
    folder = default_dir(env) if folder is None else Path(folder)
    problem = _writable(folder)
    if problem is not None:
        return f"off: {problem}"
    jax.config.update("jax_compilation_cache_dir", str(folder))
    try:
        import filelock  # noqa: F401  (a dependency: JAX's eviction locks the folder with it)
    except ImportError:  # without it JAX cannot bound the size, and warns on every read
        return f"on: {folder}"
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return f"on: {folder}"


def describe(environ=None) -> str:
    """One start-up line: where JAX's compilation cache is, or that it is off."""
    env = os.environ if environ is None else environ
    folder = jax.config.jax_compilation_cache_dir
    if folder:
        return (f"compilation cache: {folder} (programs compiled before on this machine "
                f"load from there; {OPT_OUT}=0 turns it off)")
    if _opted_out(env):
        return f"compilation cache: off ({OPT_OUT}=0)"
    return f"compilation cache: off ({default_dir(env)} cannot be written)"
