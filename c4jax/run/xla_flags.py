"""XLA settings the command lines turn on before JAX starts its backend.

    from c4jax.run import xla_flags
    xla_flags.enable_fast_cpu()   # first thing in a command's main(), before any device query

One setting: XLA:CPU's YNNPACK path for dots and elementwise fusions
(``--xla_cpu_experimental_ynn_fusion_type=dot,eltwise``). It makes training on
a CPU faster at the same strength (``docs/experiments/cpu-speed.md``, "Which XLA:CPU code
path for the network"). One ``cpu``-preset training iteration, measured on
2-core machines:

* AMD EPYC (Zen 4), jax 0.10.2: 3.4 s with the flag, 9.0 s without,
  evaluations included (``c4jax/configs/timings/cpu.json``; ``python -m
  c4jax.train --config cpu``, and the same with ``C4JAX_FAST_CPU=0``);
* an x86-64 VM whose CPU model was not recorded: 4.27 s with the flag, 7.49 s
  without, 1.75x (``docs/experiments/cpu-speed.md``; ``python -m c4jax.train --config
  cpu --train.num-iterations 10 --eval.every 0``, and the same with
  ``C4JAX_FAST_CPU=0``);
* AMD EPYC (Zen 3, AVX2 and no AVX-512), jax 0.10.2: 6.3-6.4 s with the flag,
  13.0-13.4 s without, 2.05-2.09x, evaluations off (``docs/experiments/cpu-speed.md``).

It is an ``xla_cpu`` flag: GPU and TPU backends never read it, so setting it
everywhere keeps the code platform-neutral.

XLA reads ``XLA_FLAGS`` once, when JAX creates its first backend (the first
device query or computation, not ``import jax``), and aborts the process on a
flag it does not know. So the flag is added only where all of these hold:

* the user has not opted out (``C4JAX_FAST_CPU=0``) and has not set the same
  flag in ``XLA_FLAGS`` themselves (their value wins);
* the installed jaxlib knows the flag (an experimental flag may be renamed or
  dropped by a later release: its name is looked up in jaxlib's compiled
  library rather than trusting a version number);
* JAX's backends are not started yet (later it could not take effect).

Nothing happens at import. Library code never calls this: a program that uses
c4jax as a library decides its own XLA flags (it may call this function too).
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import sys
from pathlib import Path

YNN_FLAG_NAME = "xla_cpu_experimental_ynn_fusion_type"
YNN_FLAG = f"--{YNN_FLAG_NAME}=dot,eltwise"
OPT_OUT = "C4JAX_FAST_CPU"  # "0" keeps XLA's default CPU code paths


def _jaxlib_libraries() -> list[Path]:
    """jaxlib's shared libraries, the one that holds XLA's flag table first."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or spec.origin is None:
        return []
    root = Path(spec.origin).parent
    found = sorted(root.rglob("*.so*"), key=lambda p: p.stat().st_size, reverse=True)
    return found[:3]  # XLA lives in the largest (libjax_common.so in jaxlib 0.10)


def jaxlib_knows(flag_name: str) -> bool:
    """Whether the installed jaxlib's compiled XLA defines the flag ``flag_name``."""
    needle = flag_name.encode()
    for path in _jaxlib_libraries():
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(needle) >= 0:
                    return True
        except (OSError, ValueError):
            continue
    return False


def _backends_started() -> bool:
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
    except ImportError:  # pragma: no cover - a future JAX without this module
        return False
    started = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(started()) if started is not None else False


def enable_fast_cpu(environ=None, *, child: bool = False) -> str:
    """Adds the YNNPACK flag to ``XLA_FLAGS`` where it is safe; returns what it did.

    Args:
      environ: the environment to edit (``os.environ`` by default; tests pass a dict).
      child: ``environ`` is that of a new process to be started (a benchmark's
        worker): whether this process's JAX backend started does not matter.

    Returns:
      ``"enabled"``, or the reason it was not: ``"opted out"``, ``"set by the user"``,
      ``"unknown to this jaxlib"``, ``"backend already started"``.
    """
    env = os.environ if environ is None else environ
    flags = env.get("XLA_FLAGS", "")
    if env.get(OPT_OUT, "1").strip().lower() in ("0", "false", "no", "off"):
        return "opted out"
    if YNN_FLAG_NAME in flags:
        return "set by the user"
    if not jaxlib_knows(YNN_FLAG_NAME):
        return "unknown to this jaxlib"
    if not child and _backends_started():
        return "backend already started"
    env["XLA_FLAGS"] = f"{flags} {YNN_FLAG}".strip()
    return "enabled"


def fast_cpu_on(environ=None) -> bool:
    """Whether ``XLA_FLAGS`` asks for the YNNPACK fusion this module turns on."""
    env = os.environ if environ is None else environ
    return YNN_FLAG in env.get("XLA_FLAGS", "").split()


def describe(environ=None) -> str:
    """One line for a command's start-up output: which CPU code path XLA uses."""
    if fast_cpu_on(environ):
        return f"XLA:CPU: YNNPACK fusion on (measured 1.75-2.6x faster; {OPT_OUT}=0 turns it off)"
    return "XLA:CPU: default code paths (YNNPACK fusion off)"
