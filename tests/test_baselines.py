"""Behaviour of the baseline agents (c4jax/baselines.py): random, win-if-you-can, lookahead.

The searching opponents have their own files: tests/judge/test_uct.py and
tests/judge/test_minimax.py.
"""

import jax
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.judge import arena

KEY = jax.random.PRNGKey(0)
LOOKAHEAD = jax.jit(baselines.lookahead_agent)


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
    # Columns 1-3 (indices 0-2) full; a finished game in the batch must not break anything.
    near_full = env.from_moves("111111222222333333")
    assert np.all(np.asarray(env.legal_action_mask(near_full))[:3] == [False] * 3)
    finished = env.from_moves(WIN_IN_ONE + "1")
    batch = env.stack([near_full] * 30 + [finished] * 2)
    legal = np.asarray(env.legal_action_mask(batch))
    for agent in (baselines.random_agent, baselines.win_agent, baselines.lookahead_agent):
        for i in range(3):
            action = np.asarray(jax.jit(agent)(jax.random.PRNGKey(i), batch))
            assert action.shape == (32,) and action.dtype == np.int32
            assert np.all((action >= 0) & (action < 7))
            assert np.all(legal[np.arange(30), action[:30]])


def test_random_agent_is_uniform():
    batch = env.init_batch(7000)
    counts = np.bincount(np.asarray(baselines.random_agent(KEY, batch)), minlength=7)
    assert np.all(np.abs(counts - 1000) < 150), counts
