"""Behaviour of the fixed-depth minimax opponent (c4jax/judge/minimax.py): the window
heuristic, negamax and the agent."""

import jax
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.judge import arena, minimax

KEY = jax.random.PRNGKey(0)
MINIMAX_3 = jax.jit(minimax.make_minimax_agent(depth=3))


def _batch(moves: str, copies: int = 16) -> env.State:
    return env.stack([env.from_moves(moves)] * copies)


# The positions of tests/test_baselines.py. x to move, wins at once in column 1 (index 0):
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


def test_positions_are_as_drawn():
    assert env.render(env.from_moves(WIN_IN_ONE)).splitlines()[3:] == ["xo....."] * 3
    assert env.render(env.from_moves(BLOCK_IN_ONE)).splitlines()[3:] == [
        ".o.....",
        ".o.....",
        "xox.x..",
    ]
    assert env.render(env.from_moves(BLOCK_ROW)).splitlines()[4:] == ["..o....", ".xxxo.."]


@pytest.mark.parametrize("moves, expected", [(WIN_IN_ONE, 0), (BLOCK_IN_ONE, 1), (BLOCK_ROW, 0)])
def test_minimax_wins_and_blocks(moves, expected):
    actions = MINIMAX_3(KEY, _batch(moves))
    np.testing.assert_array_equal(actions, expected)


def test_minimax_only_plays_legal_moves():
    # Columns 1-3 (indices 0-2) full; a finished game in the batch must not break anything.
    near_full = env.from_moves("111111222222333333")
    finished = env.from_moves(WIN_IN_ONE + "1")
    batch = env.stack([near_full] * 30 + [finished] * 2)
    legal = np.asarray(env.legal_action_mask(batch))
    agent = jax.jit(minimax.make_minimax_agent(2))
    for i in range(3):
        action = np.asarray(agent(jax.random.PRNGKey(i), batch))
        assert action.shape == (32,) and action.dtype == np.int32
        assert np.all((action >= 0) & (action < 7))
        assert np.all(legal[np.arange(30), action[:30]])


def test_heuristic_is_antisymmetric_and_prefers_centre():
    h_empty = float(minimax.heuristic(env.from_moves("")))
    assert h_empty == 0.0
    centre = float(minimax.heuristic(env.from_moves("4")))  # from o's side: x holds the centre
    edge = float(minimax.heuristic(env.from_moves("1")))
    assert centre < edge < 0.0


def test_minimax_beats_random():
    result = arena.play_games(minimax.make_minimax_agent(3), baselines.random_agent, KEY, 20)
    assert result.wins >= 19, str(result)
