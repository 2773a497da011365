"""Behaviour of the fixed-depth minimax opponent (c4jax/judge/minimax.py): the window
heuristic, negamax and the agent."""

import jax
import numpy as np
import pytest
from tactics import BLOCK_IN_ONE, BLOCK_ROW, WIN_IN_ONE, assert_plays_legal_moves
from tactics import batch as _batch

from c4jax import baselines, env
from c4jax.judge import arena, minimax

KEY = jax.random.PRNGKey(0)
MINIMAX_3 = jax.jit(minimax.make_minimax_agent(depth=3))


@pytest.mark.parametrize("moves, expected", [(WIN_IN_ONE, 0), (BLOCK_IN_ONE, 1), (BLOCK_ROW, 0)])
def test_minimax_wins_and_blocks(moves, expected):
    actions = MINIMAX_3(KEY, _batch(moves))
    np.testing.assert_array_equal(actions, expected)


def test_minimax_only_plays_legal_moves():
    assert_plays_legal_moves(minimax.make_minimax_agent(2))


def test_heuristic_is_antisymmetric_and_prefers_centre():
    h_empty = float(minimax.heuristic(env.from_moves("")))
    assert h_empty == 0.0
    centre = float(minimax.heuristic(env.from_moves("4")))  # from o's side: x holds the centre
    edge = float(minimax.heuristic(env.from_moves("1")))
    assert centre < edge < 0.0


def test_minimax_beats_random():
    result = arena.play_games(minimax.make_minimax_agent(3), baselines.random_agent, KEY, 20)
    assert result.wins >= 19, str(result)
