"""Behaviour of the baseline agents (c4jax/baselines.py): random, win-if-you-can, lookahead.

The searching opponents have their own files: tests/judge/test_uct.py and
tests/judge/test_minimax.py.
"""

import jax
import numpy as np
import pytest
from tactics import BLOCK_IN_ONE, BLOCK_ROW, DRAWN, WIN_IN_ONE, assert_plays_legal_moves
from tactics import batch as _batch

from c4jax import baselines, env
from c4jax.judge import arena

KEY = jax.random.PRNGKey(0)
LOOKAHEAD = jax.jit(baselines.lookahead_agent)


def test_positions_are_as_drawn():
    for moves, rows in DRAWN.items():
        assert env.render(env.from_moves(moves)).splitlines()[-len(rows):] == rows, moves


# --- The shared helpers. ---


def test_uniform_choice_stays_in_the_mask_and_falls_back_to_every_column():
    mask = np.zeros((4000, 7), bool)
    mask[:2000, [1, 4]] = True  # the other 2000 rows allow nothing
    picks = np.asarray(baselines.uniform_choice(KEY, mask))
    assert picks.dtype == np.int32
    assert set(picks[:2000]) == {1, 4} and abs(np.mean(picks[:2000] == 1) - 0.5) < 0.05
    assert set(picks[2000:]) == set(range(7))


def test_argmax_random_ties_breaks_ties_among_the_allowed_best():
    values = np.tile(np.array([[5.0, 1.0, 5.0, 9.0, 5.0, 0.0, 0.0]], np.float32), (3000, 1))
    mask = np.tile(np.array([[True, True, True, False, True, True, True]]), (3000, 1))
    picks = np.asarray(baselines.argmax_random_ties(KEY, values, mask))  # 9.0 is masked out
    counts = np.bincount(picks, minlength=7)
    assert set(np.flatnonzero(counts)) == {0, 2, 4} and np.all(counts[[0, 2, 4]] > 800), counts


def test_expand_swap_sides_and_winning_moves():
    children = baselines.expand(_batch(WIN_IN_ONE, 2))  # [2, A]
    assert children.num_moves.shape == (2, 7)
    for a in range(7):
        child = env.render(jax.tree.map(lambda x, a=a: x[0, a], children))
        assert child == env.render(env.from_moves(WIN_IN_ONE + str(a + 1)))
    np.testing.assert_array_equal(
        baselines.winning_moves(_batch(WIN_IN_ONE, 1))[0], [1, 0, 0, 0, 0, 0, 0]
    )
    # With the sides swapped, o to move wins in column 2 instead.
    swapped = baselines.swap_sides(_batch(WIN_IN_ONE, 1))
    np.testing.assert_array_equal(baselines.winning_moves(swapped)[0], [0, 1, 0, 0, 0, 0, 0])


# --- The agents. ---


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


def test_agents_only_play_legal_moves():
    for agent in (baselines.random_agent, baselines.win_agent, baselines.lookahead_agent):
        assert_plays_legal_moves(agent)


def test_random_agent_is_uniform():
    batch = env.init_batch(7000)
    counts = np.bincount(np.asarray(baselines.random_agent(KEY, batch)), minlength=7)
    assert np.all(np.abs(counts - 1000) < 150), counts
