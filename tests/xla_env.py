"""``XLA_FLAGS`` for the test session and the processes its tests start.

The suite compiles far more than it runs (a tiny preset runs an iteration in
milliseconds and compiles it for seconds), so it asks XLA:CPU to compile
cheaply:

- ``--xla_backend_optimization_level=0``: LLVM's optimisation level 0, about a
  fifth less compile time for the whole suite on a 2-core CPU;
- ``--xla_cpu_use_fusion_emitters=false``: XLA:CPU's elemental emitters for
  its fusions instead of the newer MLIR fusion emitters. At level 0 this
  halves the compile time again (the tiny preset's training iteration: 15.3 s
  of CPU to 8.5 s, its initialisation 2.2 s to 1.3 s, on a 2-core AMD EPYC,
  jax 0.10.2). At XLA's default level it compiles almost 3x slower (77.7 s
  against 28.3 s of CPU for that iteration), so the two go together;
- ``--xla_cpu_parallel_codegen_split_count=1``: one LLVM module per program
  instead of several compiled on threads: about 7% less compile CPU again
  (8.7 s to 8.0 s for that iteration), as the suite keeps both cores busy anyway.

They change how fast the compiled code runs, not what it computes; the command
lines users run keep XLA's defaults. A flag this jaxlib does not know would make
XLA abort every process, so ``add_fast_compile`` asks a child process first and
keeps only what it accepts (once per session, one child for all of them unless one
is refused: the processes that inherit the environment inherit the answer).
Importable from any test (``tests/`` is on pytest's ``pythonpath``).
"""

from __future__ import annotations

import os
import subprocess
import sys

FAST_COMPILE = "--xla_backend_optimization_level=0"
FUSION_EMITTERS_OFF = "--xla_cpu_use_fusion_emitters=false"
ONE_CODEGEN_SPLIT = "--xla_cpu_parallel_codegen_split_count=1"
_OPTIONAL = (FUSION_EMITTERS_OFF, ONE_CODEGEN_SPLIT)  # kept where this jaxlib knows them
FAST_COMPILE_FLAGS = (FAST_COMPILE, *_OPTIONAL)
_ASKED = "C4JAX_TESTS_ASKED_XLA"  # set once a child has said whether XLA knows the flags


def _name(flag: str) -> str:
    return flag.split("=", 1)[0]


def _accepted(flags: str) -> bool:
    """Whether this jaxlib's XLA:CPU starts with ``XLA_FLAGS=flags``."""
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.devices('cpu')"],
        env=env, capture_output=True, timeout=120,
    )
    return probe.returncode == 0


def add_fast_compile(env=os.environ) -> None:
    """Adds ``FAST_COMPILE_FLAGS`` to ``env["XLA_FLAGS"]``: each one unless a value
    for it is already there (the one given wins), and the other two only where
    this jaxlib accepts them, with the optimisation level they go with."""
    flags = env.get("XLA_FLAGS", "").split()
    given = {_name(f) for f in flags}
    if _name(FAST_COMPILE) not in given:
        flags.append(FAST_COMPILE)
    if FAST_COMPILE in flags and _ASKED not in env:
        env[_ASKED] = "1"
        wanted = [flag for flag in _OPTIONAL if _name(flag) not in given]
        if wanted and _accepted(" ".join([*flags, *wanted])):  # one child for all, usually
            flags += wanted
        else:
            flags += [flag for flag in wanted if _accepted(" ".join([*flags, flag]))]
    env["XLA_FLAGS"] = " ".join(flags)


def with_devices(count: int) -> str:
    """This session's ``XLA_FLAGS`` for a child process with ``count`` forced CPU
    devices (the session's own flags kept, a device count it had replaced)."""
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split()
            if not f.startswith("--xla_force_host_platform_device_count")]
    return " ".join([*kept, f"--xla_force_host_platform_device_count={count}"])


def optimized() -> dict[str, str]:
    """This session's environment for a child process that runs long rather than
    compiles much: ``FAST_COMPILE_FLAGS`` taken out (XLA's defaults)."""
    names = {_name(f) for f in FAST_COMPILE_FLAGS}
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if _name(f) not in names]
    return {**os.environ, "XLA_FLAGS": " ".join(flags)}
