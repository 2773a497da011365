"""Checksums of arrays by leaf name, and the finite-network check."""

import jax
import jax.numpy as jnp
import numpy as np

from c4jax.store import integrity


def _tree():
    return {
        "learner": {"params": {"w": jnp.arange(6.0).reshape(2, 3)}, "step": jnp.int32(3)},
        "key": jax.random.key(0),
        "replay": np.full((4,), np.inf, np.float32),  # not a network variable
    }


def test_digests_name_leaves_by_path_and_find_any_changed_bit():
    tree = _tree()
    digests = integrity.leaf_digests(tree)
    assert sorted(digests) == ["key", "learner/params/w", "learner/step", "replay"]
    assert integrity.check_leaves(tree, digests) is None
    assert integrity.check_leaves({"learner": {"params": tree["learner"]["params"]}},
                                  digests) is None  # a part of the tree: its leaves only
    w = np.asarray(tree["learner"]["params"]["w"]).copy()
    w.view(np.uint32).reshape(-1)[4] ^= 1 << 7  # one bit of one float
    changed = {**tree, "learner": {**tree["learner"], "params": {"w": jnp.asarray(w)}}}
    assert integrity.check_leaves(changed, digests) == (
        "the checksum of learner/params/w does not match: its data changed on disk"
    )
    assert integrity.check_leaves(changed, {}) is None  # nothing recorded: nothing compared


def test_a_digest_covers_dtype_and_shape():
    a = integrity.leaf_digests({"x": np.zeros(4, np.float32)})["x"]
    assert a != integrity.leaf_digests({"x": np.zeros(4, np.int32)})["x"]
    assert a != integrity.leaf_digests({"x": np.zeros((2, 2), np.float32)})["x"]


def test_nonfinite_network_variables_are_named():
    tree = _tree()
    assert integrity.nonfinite_leaf(tree) is None  # replay's inf is no network variable
    bad = {**tree, "best": {"batch_stats": {"mean": jnp.array([0.0, jnp.nan])}}}
    assert integrity.nonfinite_leaf(bad) == "best/batch_stats/mean"
    assert integrity.check_leaves(bad, {}) == "best/batch_stats/mean holds NaN or infinity"
    assert integrity.nonfinite_leaf({"params": jnp.array([1.0], jnp.bfloat16) / 0}) == "params"


def test_file_digest_is_sha256(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert integrity.file_digest(tmp_path / "f") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
