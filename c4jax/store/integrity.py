"""Checksums of saved arrays and files, and the finite-parameters check.

A checkpoint carries a SHA-256 digest of every array (leaf) of the state it
saved (``leaf_digests``), so a read of the whole state or of a part of it
(only the network) checks exactly the leaves it read (``check_leaves``). An
exported network carries the SHA-256 of its files (``file_digest``). Network
variables that are NaN or infinite are damage too (``nonfinite_leaf``), with or
without checksums: no training ever saves them (its NaN guard stops first).

Leaves are named by their path of keys, ``learner/params/Conv_0/kernel``: the
same name for a dataclass field and a dict key, so that the dict a partial
read asks for finds the digests of the dataclass that was saved.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jax
import numpy as np

ALGORITHM = "sha256"
# The path components that mark a leaf as a network variable (AlphaZero's
# learner.params, best.params and batch_stats; DQN's params and target_params).
_NETWORK_MARKS = ("params", "batch_stats")


def leaf_name(path) -> str:
    """``a/b/0/c``: the keys of a ``jax.tree_util`` path, whatever their kind."""

    def name(key) -> str:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                return str(getattr(key, attr))
        return str(key)

    return "/".join(name(key) for key in path)


def _host_value(leaf) -> np.ndarray | None:
    """``leaf`` as a host array, or None where this process does not hold all of it
    (an array sharded over several processes: it is saved, but not checksummed)."""
    if isinstance(leaf, jax.Array):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        if not leaf.is_fully_addressable:
            if not leaf.is_fully_replicated:
                return None
            leaf = leaf.addressable_data(0)
    return np.ascontiguousarray(np.asarray(leaf))


def _digest(value: np.ndarray) -> str:
    digest = hashlib.sha256(f"{value.dtype.str}{value.shape}".encode())
    digest.update(memoryview(value.reshape(-1)).cast("B") if value.size else b"")
    return digest.hexdigest()


def leaf_digests(tree: Any) -> dict[str, str]:
    """``{leaf name: SHA-256 hex}`` of every array of ``tree`` this process holds whole.

    The digest covers the dtype, the shape and the bytes (a typed PRNG key: its
    key data). Arrays sharded across processes are left out.
    """
    digests = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        value = _host_value(leaf)
        if value is not None:
            digests[leaf_name(path)] = _digest(value)
    return digests


def check_leaves(tree: Any, digests: dict[str, str]) -> str | None:
    """What is wrong with the arrays of ``tree`` (a restored state or a part of it),
    in a few words, or None.

    Wrong: a leaf whose digest in ``digests`` differs from its own (leaves
    without a recorded digest are not checked), or a network variable that
    holds NaN or infinity (``nonfinite_leaf``).
    """
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        name = leaf_name(path)
        recorded = digests.get(name)
        if recorded is None:
            continue
        value = _host_value(leaf)
        if value is not None and _digest(value) != recorded:
            return f"the checksum of {name} does not match: its data changed on disk"
    bad = nonfinite_leaf(tree)
    return None if bad is None else f"{bad} holds NaN or infinity"


def nonfinite_leaf(tree: Any) -> str | None:
    """The name of the first network variable of ``tree`` (a leaf under a
    ``params`` or ``batch_stats`` key) that is not all finite, or None."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        name = leaf_name(path)
        if not any(mark in part for part in name.split("/") for mark in _NETWORK_MARKS):
            continue
        if not jax.dtypes.issubdtype(getattr(leaf, "dtype", np.int32), np.inexact):
            continue
        value = _host_value(leaf)
        if value is not None and not np.isfinite(value).all():
            return name
    return None


def file_digest(path: str | Path) -> str:
    """The SHA-256 hex digest of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
