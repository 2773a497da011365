"""c4jax: AlphaZero for Connect Four in JAX.

``c4jax.Player`` (a trained agent behind a move-string API) is loaded on first
use, so importing a submodule such as ``c4jax.env`` stays light.

Importing c4jax checks the installed JAX against the oldest release the code
runs on (``MIN_JAX``) before anything imports JAX, so that a runtime with an older
one preinstalled (Colab's, say) fails with the fix in one line rather than with an
``AttributeError`` deep inside a module.
"""

from __future__ import annotations

import sys
from importlib import metadata

__all__ = ["MIN_JAX", "Player", "__version__"]

# The oldest JAX the code runs on: jax.shard_map (the trainer's sharded replay
# sampling) is first in 0.6.1. pyproject.toml's bound is the same (a test checks).
MIN_JAX = "0.6.1"


def _installed_version() -> str:
    """This package's version: the installed distribution's, else ``0+unknown``.

    ``0+unknown`` is a source tree on ``sys.path`` that was never pip-installed.
    """
    try:
        return metadata.version("c4jax")
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: ``0.4.33.dev2024`` -> (0, 4, 33)."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(part):  # 1rc1, 0b2: a pre-release of this number ends it
            break
    return tuple(parts)


def _jax_version() -> str | None:
    """The JAX this process has (or will import), without importing it; None if none."""
    module = sys.modules.get("jax")
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        return None  # not installed: the first `import jax` says so itself


def check_jax(version: str | None = None) -> None:
    """Raises ImportError with the fix if JAX ``version`` (default: the installed one)
    is older than ``MIN_JAX``."""
    version = _jax_version() if version is None else version
    if version is None or _release(version) >= _release(MIN_JAX):
        return
    raise ImportError(
        f"c4jax needs jax>={MIN_JAX}; this runtime has jax {version} (a preinstalled one, "
        f"as on Colab?): pip install -U 'jax>={MIN_JAX}' (on a Colab TPU: pip install -U "
        f"'jax[tpu]>={MIN_JAX}'), then restart the Python session"
    )


check_jax()


def __dir__():
    """The module's names and the lazily imported ``Player`` (tab completion)."""
    return sorted({*globals(), *__all__})


def __getattr__(name):
    if name == "Player":
        from c4jax.player import Player

        return Player
    raise AttributeError(f"module 'c4jax' has no attribute {name!r}")
