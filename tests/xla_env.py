"""``XLA_FLAGS`` for the test session and the processes its tests start.

The suite compiles far more than it runs (a tiny preset runs an iteration in
milliseconds and compiles it for seconds), so it asks XLA:CPU's LLVM backend for
optimisation level 0: about a fifth less compile time for the whole suite on a
2-core CPU. It changes how fast the compiled code runs, not what it computes; the
command lines users run keep XLA's default. Importable from any test (``tests/``
is on pytest's ``pythonpath``).
"""

from __future__ import annotations

import os

FAST_COMPILE = "--xla_backend_optimization_level=0"


def add_fast_compile(env=os.environ) -> None:
    """Adds ``FAST_COMPILE`` to ``env["XLA_FLAGS"]`` unless an optimisation level is
    already there (the one given wins)."""
    flags = env.get("XLA_FLAGS", "")
    if "--xla_backend_optimization_level" not in flags:
        env["XLA_FLAGS"] = f"{flags} {FAST_COMPILE}".strip()


def with_devices(count: int) -> str:
    """This session's ``XLA_FLAGS`` for a child process with ``count`` forced CPU
    devices (the session's own flags kept, a device count it had replaced)."""
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split()
            if not f.startswith("--xla_force_host_platform_device_count")]
    return " ".join([*kept, f"--xla_force_host_platform_device_count={count}"])


def optimized() -> dict[str, str]:
    """This session's environment for a child process that runs long rather than
    compiles much: ``FAST_COMPILE`` taken out (XLA's default optimisation)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if f != FAST_COMPILE]
    return {**os.environ, "XLA_FLAGS": " ".join(flags)}
