"""Grogu's alignment features on ASCII boards, and the two Q-networks."""

import jax
import numpy as np

from c4jax import env
from c4jax.dqn import qnet
from c4jax.dqn.config import ModelConfig


def _index(cells):
    """The row of ALIGNMENTS holding exactly these (row from the top, column) cells."""
    want = np.zeros(42, np.float32)
    want[[r * 7 + c for r, c in cells]] = 1
    (found,) = np.flatnonzero(np.all(qnet.ALIGNMENTS == want, axis=1))
    return found


def test_the_69_alignments():
    assert qnet.ALIGNMENTS.shape == (69, 42)
    assert np.all(qnet.ALIGNMENTS.sum(axis=1) == 4)
    assert len({tuple(row) for row in qnet.ALIGNMENTS}) == 69
    # How many lines pass through each cell: the classic Connect Four table.
    per_cell = qnet.ALIGNMENTS.sum(axis=0).reshape(6, 7).astype(int)
    np.testing.assert_array_equal(per_cell, [
        [3, 4, 5, 7, 5, 4, 3],
        [4, 6, 8, 10, 8, 6, 4],
        [5, 8, 11, 13, 11, 8, 5],
        [5, 8, 11, 13, 11, 8, 5],
        [4, 6, 8, 10, 8, 6, 4],
        [3, 4, 5, 7, 5, 4, 3],
    ])


def test_features_from_the_movers_side():
    # x to move (6 stones):
    #   .......
    #   .......
    #   .......
    #   .......
    #   ooo....
    #   xxx....
    state = env.from_moves("112233")
    assert env.render(state).splitlines()[4:] == ["ooo....", "xxx...."]
    features = np.asarray(qnet.grogu_features(env.observe(env.stack([state]))))[0]
    assert features.shape == (qnet.NUM_FEATURES,) == (111,)
    cells = features[:42].reshape(6, 7)
    np.testing.assert_array_equal(cells[5, :4], [1, 1, 1, 0])  # x's stones are +1 for x
    np.testing.assert_array_equal(cells[4, :4], [-1, -1, -1, 0])
    sums = features[42:]
    assert sums[_index([(5, 0), (5, 1), (5, 2), (5, 3)])] == 3  # x's open three
    assert sums[_index([(4, 0), (4, 1), (4, 2), (4, 3)])] == -3  # o's three
    assert sums[_index([(5, 0), (4, 0), (3, 0), (2, 0)])] == 0  # x then o in column 1
    assert sums[_index([(5, 3), (5, 4), (5, 5), (5, 6)])] == 0
    # After x plays column 4 it is o's turn: the same lines, from o's side.
    after = np.asarray(qnet.grogu_features(env.observe(env.stack([env.from_moves("1122334")]))))
    assert after[0, 42 + _index([(5, 0), (5, 1), (5, 2), (5, 3)])] == -4


def test_networks_give_one_value_per_column():
    obs = env.observe(env.stack([env.from_moves(""), env.from_moves("4453")]))
    for kind, size in (("linear", 111 * 7 + 7), ("mlp", None)):
        module = qnet.make_q_network(ModelConfig(kind=kind, hidden="16,8"))
        params = qnet.init_params(module, jax.random.key(0))
        q = qnet.make_apply(module)(params, obs)
        assert q.shape == (2, 7) and np.all(np.isfinite(q))
        count = sum(x.size for x in jax.tree.leaves(params))
        assert count == (size or 42 * 16 + 16 + 16 * 8 + 8 + 8 * 7 + 7)


def test_grogu_is_one_matrix_product():
    module = qnet.make_q_network(ModelConfig(kind="linear"))
    params = qnet.init_params(module, jax.random.key(1))
    obs = env.observe(env.stack([env.from_moves("4453"), env.from_moves("1")]))
    q = np.asarray(qnet.make_apply(module)(params, obs))
    features = np.asarray(qnet.grogu_features(obs))
    dense = params["Dense_0"]
    np.testing.assert_allclose(q, features @ dense["kernel"] + dense["bias"], rtol=1e-5, atol=1e-5)
