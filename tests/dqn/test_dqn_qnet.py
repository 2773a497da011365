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


def test_alignments_keep_the_order_grogus_weights_were_trained_on():
    # Direction by direction (horizontal 0-23, vertical 24-44, then the two
    # diagonals), each in reading order; (row from the top, column) cells.
    assert _index([(0, 0), (0, 1), (0, 2), (0, 3)]) == 0
    assert _index([(5, 3), (5, 4), (5, 5), (5, 6)]) == 23
    assert _index([(0, 0), (1, 0), (2, 0), (3, 0)]) == 24
    assert _index([(2, 6), (3, 6), (4, 6), (5, 6)]) == 44
    assert _index([(0, 0), (1, 1), (2, 2), (3, 3)]) == 45
    assert _index([(0, 3), (1, 2), (2, 1), (3, 0)]) == 57
    assert _index([(2, 6), (3, 5), (4, 4), (5, 3)]) == 68
    # The same table as env's lines of four, over the observation's cells.
    np.testing.assert_array_equal(qnet.ALIGNMENTS, env.LINE_PLANES.reshape(69, 42))


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


# -- Grogu+ ---------------------------------------------------------------------

_PLUS = ("win", "block", "gives", "spoils", "makes", "stops")


def _plus(moves: str) -> dict[str, np.ndarray]:
    obs = env.observe(env.stack([env.from_moves(moves)]))
    features = np.asarray(qnet.grogu_plus_features(obs))[0]
    assert features.shape == (qnet.NUM_PLUS_FEATURES,) == (153,)
    np.testing.assert_array_equal(features[:111], np.asarray(qnet.grogu_features(obs))[0])
    return {name: features[111 + 7 * i: 111 + 7 * (i + 1)] for i, name in enumerate(_PLUS)}


def test_grogu_plus_sees_a_win_in_one_and_the_block_from_the_other_side():
    # x to move:
    #   .......
    #   .......
    #   .......
    #   .......
    #   ooo....
    #   xxx....
    f = _plus("112233")
    np.testing.assert_array_equal(f["win"], [0, 0, 0, 1, 0, 0, 0])  # column 4 wins for x
    np.testing.assert_array_equal(f["block"], [0, 0, 0, 0, 0, 0, 0])  # o's 4th cell floats
    # o's three on row 2 completes at (row 2, column 4), right above x's winning cell:
    np.testing.assert_array_equal(f["gives"], [0, 0, 0, 1, 0, 0, 0])
    # After x plays elsewhere (column 7), o to move: o sees the block of x's three.
    g = _plus("1122337")
    np.testing.assert_array_equal(g["block"], [0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(g["win"], [0, 0, 0, 0, 0, 0, 0])


def test_grogu_plus_only_counts_playable_cells():
    # x to move. o's three on row 2 (columns 2-4) completes at column 5, row 2, which
    # floats above an empty cell: no block is possible yet, but playing column 5
    # would give o the win.
    #   .......
    #   .......
    #   .......
    #   .......
    #   xooo...
    #   xoxx...
    moves = "12324314"
    assert env.render(env.from_moves(moves)).splitlines()[4:] == ["xooo...", "xoxx..."]
    f = _plus(moves)
    np.testing.assert_array_equal(f["block"], [0] * 7)
    np.testing.assert_array_equal(f["gives"], [0, 0, 0, 0, 1, 0, 0])
    state = env.from_moves(moves)
    board = env.render(state).splitlines()
    f = _plus(moves)
    # whatever the picture, the features must agree with a direct scan of the board:
    grid = [list(r) for r in board]
    mover = "x" if len(moves) % 2 == 0 else "o"
    other = "o" if mover == "x" else "x"

    def completes(r, c, who):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for k in range(4):
                cells = [(r + (i - k) * dr, c + (i - k) * dc) for i in range(4)]
                if all(0 <= rr < 6 and 0 <= cc < 7 for rr, cc in cells) and all(
                    grid[rr][cc] == who for rr, cc in cells if (rr, cc) != (r, c)
                ):
                    return True
        return False

    for c in range(7):
        empty_rows = [r for r in range(6) if grid[r][c] == "."]
        r = max(empty_rows)  # the playable cell (row 0 is the top)
        assert f["win"][c] == completes(r, c, mover), c
        assert f["block"][c] == completes(r, c, other), c
        above = r - 1
        assert f["gives"][c] == (above >= 0 and completes(above, c, other)), c
        assert f["spoils"][c] == (above >= 0 and completes(above, c, mover)), c


def test_grogu_plus_counts_twos_through_the_playable_cell():
    # x to move after 1 2 1 2: x has two in column 1, o two in column 2 (vertical twos).
    f = _plus("1212")
    assert f["makes"][0] >= 1  # (row 3, col 1) is on x's vertical two
    assert f["stops"][1] >= 1  # (row 3, col 2) is on o's vertical two
    assert f["win"].sum() == f["block"].sum() == 0


def test_grogu_plus_is_one_matrix_product_and_a_full_column_is_zero():
    module = qnet.make_q_network(ModelConfig(kind="linear_plus"))
    params = qnet.init_params(module, jax.random.key(1))
    assert sum(x.size for x in jax.tree.leaves(params)) == 153 * 7 + 7
    moves = "444444"  # column 4 full
    obs = env.observe(env.stack([env.from_moves(moves), env.from_moves("1")]))
    q = np.asarray(qnet.make_apply(module)(params, obs))
    features = np.asarray(qnet.grogu_plus_features(obs))
    dense = params["Dense_0"]
    np.testing.assert_allclose(q, features @ dense["kernel"] + dense["bias"], rtol=1e-5, atol=1e-5)
    f = _plus(moves)
    assert all(f[name][3] == 0 for name in _PLUS)
