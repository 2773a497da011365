"""Behaviour of the baseline agents."""

import jax
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.judge import arena, minimax, uct

KEY = jax.random.PRNGKey(0)
LOOKAHEAD = jax.jit(baselines.lookahead_agent)
MINIMAX_3 = jax.jit(minimax.make_minimax_agent(depth=3))


def _batch(moves: str, copies: int = 16) -> env.State:
    return env.stack([env.from_moves(moves)] * copies)


# x (first player) to move; x wins at once in column 1 (index 0), and o's threat
# in column 2 must not distract it:
#   .......
#   .......
#   .......
#   xo.....
#   xo.....
#   xo.....
WIN_IN_ONE = "121212"

# x to move, no win of its own; o threatens four in column 2 (index 1):
#   .......
#   .......
#   .......
#   .o.....
#   .o.....
#   xox.x..
BLOCK_IN_ONE = "123252"

# o to move: x threatens a horizontal four at a1 (index 0) only (e1 is o's):
#   .......
#   .......
#   .......
#   .......
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
def test_lookahead_wins_and_blocks(moves, expected):
    actions = LOOKAHEAD(KEY, _batch(moves))
    np.testing.assert_array_equal(actions, expected)


def test_win_if_you_can_wins_but_never_blocks():
    win = jax.jit(baselines.win_agent)
    np.testing.assert_array_equal(win(KEY, _batch(WIN_IN_ONE)), 0)
    # With no win of its own it plays at random: over 700 tries it ignores the
    # block in column 2 most of the time and spreads over all seven columns.
    moves = np.asarray(win(KEY, _batch(BLOCK_IN_ONE, 700)))
    counts = np.bincount(moves, minlength=7)
    assert np.all(counts > 50), counts


def test_win_if_you_can_sits_between_random_and_lookahead():
    vs_random = arena.play_games(baselines.win_agent, baselines.random_agent, KEY, 200)
    vs_lookahead = arena.play_games(baselines.win_agent, baselines.lookahead_agent, KEY, 200)
    assert vs_random.score > 0.6, str(vs_random)
    assert vs_lookahead.score < 0.4, str(vs_lookahead)


@pytest.mark.parametrize("moves, expected", [(WIN_IN_ONE, 0), (BLOCK_IN_ONE, 1), (BLOCK_ROW, 0)])
def test_minimax_wins_and_blocks(moves, expected):
    actions = MINIMAX_3(KEY, _batch(moves))
    np.testing.assert_array_equal(actions, expected)


def test_agents_only_play_legal_moves():
    # Columns 1-3 (indices 0-2) full; a finished game in the batch must not break anything.
    near_full = env.from_moves("111111222222333333")
    assert np.all(np.asarray(env.legal_action_mask(near_full))[:3] == [False] * 3)
    finished = env.from_moves(WIN_IN_ONE + "1")
    batch = env.stack([near_full] * 30 + [finished] * 2)
    legal = np.asarray(env.legal_action_mask(batch))
    for agent in (
        baselines.random_agent,
        baselines.win_agent,
        baselines.lookahead_agent,
        minimax.make_minimax_agent(2),
        uct.make_mcts_agent(16),
    ):
        for i in range(3):
            action = np.asarray(jax.jit(agent)(jax.random.PRNGKey(i), batch))
            assert action.shape == (32,) and action.dtype == np.int32
            assert np.all((action >= 0) & (action < 7))
            assert np.all(legal[np.arange(30), action[:30]])


def test_random_agent_is_uniform():
    batch = env.init_batch(7000)
    counts = np.bincount(np.asarray(baselines.random_agent(KEY, batch)), minlength=7)
    assert np.all(np.abs(counts - 1000) < 150), counts


def test_rollout_value_range():
    values = np.asarray(uct.rollout_value(KEY, _batch("", 512)))
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}
    # The first player wins random playouts more often (about 55%).
    assert 0.0 < values.mean() < 0.3
    # A finished game scores 0.
    assert float(uct.rollout_value(KEY, _batch(WIN_IN_ONE + "1", 1))[0]) == 0.0


def test_heuristic_is_antisymmetric_and_prefers_centre():
    h_empty = float(minimax.heuristic(env.from_moves("")))
    assert h_empty == 0.0
    centre = float(minimax.heuristic(env.from_moves("4")))  # from o's side: x holds the centre
    edge = float(minimax.heuristic(env.from_moves("1")))
    assert centre < edge < 0.0


def test_minimax_beats_random():
    result = arena.play_games(minimax.make_minimax_agent(3), baselines.random_agent, KEY, 20)
    assert result.wins >= 19, str(result)


def test_mcts_1000_beats_random():
    """Acceptance: pure MCTS with 1000 rollouts wins at least 95 of 100 games (~40 s on 2 CPUs)."""
    result = arena.play_games(uct.make_mcts_agent(1000), baselines.random_agent, KEY, 100)
    assert result.wins >= 95, str(result)


def test_mcts_takes_win_and_block():
    agent = jax.jit(uct.make_mcts_agent(200))
    np.testing.assert_array_equal(agent(KEY, _batch(WIN_IN_ONE, 4)), 0)
    np.testing.assert_array_equal(agent(KEY, _batch(BLOCK_IN_ONE, 4)), 1)
