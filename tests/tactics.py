"""Positions drawn as boards, and the legality check, shared by the tests of every agent
(tests/test_baselines.py, tests/judge/test_uct.py, tests/judge/test_minimax.py).
A helper module, not a test file: pytest's ``pythonpath`` puts tests/ on the path."""

import jax
import numpy as np

from c4jax import env

# x (first player) to move; x wins at once in column 1 (index 0), and o's threat
# in column 2 must not distract it:
#   xo.....
#   xo.....
#   xo.....
WIN_IN_ONE = "121212"

# x to move, no win of its own; o threatens four in column 2 (index 1):
#   .o.....
#   .o.....
#   xox.x..
BLOCK_IN_ONE = "123252"

# o to move: x threatens a horizontal four at a1 (index 0) only (e1 is o's):
#   ..o....
#   .xxxo..
BLOCK_ROW = "25334"

DRAWN = {  # the bottom rows of each position, as env.render draws them
    WIN_IN_ONE: ["xo.....", "xo.....", "xo....."],
    BLOCK_IN_ONE: [".o.....", ".o.....", "xox.x.."],
    BLOCK_ROW: ["..o....", ".xxxo.."],
}


def batch(moves: str, copies: int = 16) -> env.State:
    """``copies`` of the position after ``moves``, as one batch."""
    return env.stack([env.from_moves(moves)] * copies)


def assert_plays_legal_moves(agent) -> None:
    """``agent(key, state[B])`` picks legal columns beside full ones, and a finished game in
    the batch breaks nothing (its move is any column index)."""
    near_full = env.from_moves("111111222222333333")  # columns 1-3 (indices 0-2) full
    assert not np.asarray(env.legal_action_mask(near_full))[:3].any()
    finished = env.from_moves(WIN_IN_ONE + "1")
    positions = env.stack([near_full] * 30 + [finished] * 2)
    legal = np.asarray(env.legal_action_mask(positions))
    act = jax.jit(agent)
    for i in range(3):
        action = np.asarray(act(jax.random.PRNGKey(i), positions))
        assert action.shape == (32,) and action.dtype == np.int32
        assert np.all((action >= 0) & (action < 7))
        assert np.all(legal[np.arange(30), action[:30]])
