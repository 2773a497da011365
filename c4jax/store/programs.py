"""Traced programs kept on disk, so that a later process skips tracing them.

JAX's persistent compilation cache skips XLA's compile, but a new process still
traces and lowers every jitted function in Python before it can look the
compiled program up: for the fused training iteration that is most of a warm
start-up (tens of seconds on a 2-core CPU). ``stored_jit`` keeps the lowered
program itself, with ``jax.export``: the first process traces it as usual and
writes it; later ones read it back, and their ``jax.jit`` of the stored program
lowers in a moment, so the compilation cache is reached almost at once.

    from c4jax.store import programs
    programs.enable(folder)                       # a command line does this
    step = programs.stored_jit(fn, name="step", key=config_text, donate_argnums=0)
    step(state, key)                              # traced, or read back

A program's file is named by a SHA-256 of everything its lowering depends on:
``key`` (the caller's: its configuration), the arguments' shapes, dtypes and
shardings, the devices, the versions of jax, jaxlib, flax, optax, mctx and chex,
and the contents of c4jax's own source files. Any change is a miss, never a
stale program. Each file carries a SHA-256 of its contents, checked before use:
a damaged or unreadable file is traced again and replaced, with a warning.

The files hold a pickled ``jax.tree_util`` structure beside the exported
program; like JAX's compilation cache (which holds executable code), the folder
must be the user's own. Nothing happens at import, and library code never
enables the store: a program that uses c4jax as a library decides (``enable``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import pickle
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax import export

from c4jax.store import outputs

FORMAT = 1  # of the files; a new format is a new name, so old files are never read
_PACKAGES = ("jax", "jaxlib", "flax", "optax", "mctx", "chex")
_folder: Path | None = None


def enable(folder: str | Path | None) -> None:
    """Keeps traced programs in ``folder`` from now on in this process (None: off)."""
    global _folder
    _folder = None if folder is None else Path(folder)


def folder() -> Path | None:
    """Where ``stored_jit`` keeps programs, or None when it is off."""
    return _folder


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """SHA-256 of c4jax's source files and the versions of the packages it traces."""
    digest = hashlib.sha256()
    for package in _PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}=={version}\n".encode())
    root = Path(__file__).resolve().parents[1]  # the c4jax package
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _describe(leaf: Any) -> str:
    """An argument's shape, dtype, weak type and sharding (arrays, ShapeDtypeStructs,
    numpy or Python scalars)."""
    dtype = getattr(leaf, "dtype", type(leaf).__name__)
    weak = getattr(leaf, "weak_type", isinstance(leaf, (bool, int, float, complex)))
    return f"{np.shape(leaf)} {dtype} weak={weak} {getattr(leaf, 'sharding', None)}"


def program_name(name: str, key: str, args: tuple) -> str:
    """The file name of ``name`` traced for ``key`` and ``args`` (arrays or
    ``jax.ShapeDtypeStruct``s) in this process's setting."""
    digest = hashlib.sha256()
    leaves, tree = jax.tree.flatten(args)
    devices = jax.devices()
    for part in (
        f"format {FORMAT}", name, key, str(tree), *map(_describe, leaves),
        f"{jax.process_count()} processes, {len(devices)} x {devices[0].device_kind}",
        f"x64 {jax.config.jax_enable_x64}",
        f"precision {jax.config.jax_default_matmul_precision}",
        _code_fingerprint(),
    ):
        digest.update(part.encode() + b"\0")
    return f"{name}-{digest.hexdigest()[:32]}.jaxprog"


def _load(path: Path) -> tuple[export.Exported, Any] | None:
    """The program in ``path``, or None if there is none; a damaged one warns."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        warnings.warn(f"{path}: cannot be read ({err.strerror}); tracing again", stacklevel=3)
        return None
    checksum, payload = blob[:32], blob[32:]
    if hashlib.sha256(payload).digest() != checksum:
        warnings.warn(f"{path}: damaged (its checksum does not match); tracing again",
                      stacklevel=3)
        return None
    stored = pickle.loads(payload)
    return export.deserialize(stored["exported"]), stored["out_tree"]


def _save(path: Path, exported: export.Exported, out_tree: Any) -> None:
    payload = pickle.dumps({"exported": bytes(exported.serialize()), "out_tree": out_tree})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        outputs.write_whole(
            path, lambda tmp: tmp.write_bytes(hashlib.sha256(payload).digest() + payload))
    except OSError as err:  # a full disk or a read-only folder: only time is lost
        warnings.warn(f"{path}: not saved ({err.strerror}); the next process traces again",
                      stacklevel=3)


class StoredJit:
    """``jax.jit(fun, **jit_kwargs)`` that reads its lowered program from the store
    when it was traced before for the same arguments, and writes it there when not.

    Calling it, ``lower`` and ``trace`` take the arguments ``fun`` takes. The store
    is consulted at the first of them (nothing is traced before); with the store
    off, it is ``jax.jit`` itself. ``source`` says where the program came from:
    ``"traced"``, ``"stored"`` (read back) or None before the first call.
    """

    def __init__(self, fun: Callable, *, name: str, key: str, **jit_kwargs):
        self._fun, self._name, self._key, self._kwargs = fun, name, key, jit_kwargs
        self._jitted = None
        self.source: str | None = None

    def _resolve(self, args: tuple):
        if self._jitted is not None:
            return self._jitted
        store = _folder
        if store is None or jax.process_count() > 1:  # (each process traces its own)
            self._jitted, self.source = jax.jit(self._fun, **self._kwargs), "traced"
            return self._jitted
        path = store / program_name(self._name, self._key, args)
        loaded = _load(path)
        if loaded is None:
            exported, out_tree = self._export(args)
            _save(path, exported, out_tree)
            self.source = "traced"
        else:
            exported, out_tree = loaded
            self.source = "stored"
        self._jitted = jax.jit(self._unflattened(exported, out_tree), **self._kwargs)
        return self._jitted

    def _export(self, args: tuple) -> tuple[export.Exported, Any]:
        """``fun`` traced once over the flat leaves of ``args`` (what ``jax.export``
        keeps without pytree registrations), and its output's structure."""
        unsupported = set(self._kwargs) - {"in_shardings", "out_shardings", "donate_argnums"}
        if unsupported:
            raise TypeError(f"stored_jit: unsupported jit options {sorted(unsupported)}")
        in_shardings = self._kwargs.get("in_shardings")
        out_shardings = self._kwargs.get("out_shardings")
        in_tree, captured = jax.tree.structure(args), {}

        def flat(*leaves):
            out = self._fun(*jax.tree.unflatten(in_tree, leaves))
            flat_out = jax.tree.leaves(out)
            if out_shardings is not None:
                flat_out = [jax.lax.with_sharding_constraint(x, s) for x, s in
                            zip(flat_out, _broadcast_leaves(out_shardings, out), strict=True)]
            captured["out_tree"] = jax.tree.structure(out)
            return flat_out

        flat_in = None if in_shardings is None else tuple(_broadcast_leaves(in_shardings, args))
        # The outer jax.jit donates; the stored program need not know.
        exported = export.export(jax.jit(flat, in_shardings=flat_in))(*jax.tree.leaves(args))
        return exported, captured["out_tree"]

    @staticmethod
    def _unflattened(exported: export.Exported, out_tree):
        def call(*args):
            return jax.tree.unflatten(out_tree, exported.call(*jax.tree.leaves(args)))
        return call

    def __call__(self, *args):
        return self._resolve(args)(*args)

    def lower(self, *args):
        return self._resolve(args).lower(*args)

    def trace(self, *args):
        return self._resolve(args).trace(*args)

    def _cache_size(self) -> int:
        return 0 if self._jitted is None else self._jitted._cache_size()


def _broadcast_leaves(prefix: Any, tree: Any) -> list:
    """One entry of ``prefix`` (a pytree prefix of ``tree``, e.g. a sharding per
    argument) for each leaf of ``tree``."""
    expanded = jax.tree.map(
        lambda p, sub: jax.tree.map(lambda _: p, sub), prefix, tree,
        is_leaf=lambda x: isinstance(x, jax.sharding.Sharding))
    return jax.tree.leaves(expanded, is_leaf=lambda x: isinstance(x, jax.sharding.Sharding))


def stored_jit(fun: Callable, *, name: str, key: str, **jit_kwargs) -> StoredJit:
    """``jax.jit(fun, **jit_kwargs)`` kept in the store (``StoredJit``).

    Args:
        fun: a pure function of pytrees of arrays.
        name: a short name for its files (``iteration``).
        key: what ``fun``'s program depends on beyond its code and arguments (its
            configuration, as text).
        jit_kwargs: ``in_shardings``, ``out_shardings`` and ``donate_argnums`` only.
    """
    return StoredJit(fun, name=name, key=key, **jit_kwargs)
