"""Behaviour of pure Monte Carlo tree search (c4jax/judge/uct.py): random rollouts and the
MCTS agent."""

import jax
import numpy as np
from tactics import BLOCK_IN_ONE, WIN_IN_ONE, assert_plays_legal_moves
from tactics import batch as _batch

from c4jax import baselines
from c4jax.judge import arena, uct

KEY = jax.random.PRNGKey(0)


def test_rollout_value_range():
    values = np.asarray(uct.rollout_value(KEY, _batch("", 512)))
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}
    # The first player wins random playouts more often (about 55%).
    assert 0.0 < values.mean() < 0.3
    # A finished game scores 0.
    assert float(uct.rollout_value(KEY, _batch(WIN_IN_ONE + "1", 1))[0]) == 0.0


def test_mcts_only_plays_legal_moves():
    assert_plays_legal_moves(uct.make_mcts_agent(16))


def test_mcts_1000_beats_random():
    """Acceptance: pure MCTS with 1000 rollouts wins at least 95 of 100 games (~40 s on 2 CPUs)."""
    result = arena.play_games(uct.make_mcts_agent(1000), baselines.random_agent, KEY, 100)
    assert result.wins >= 95, str(result)


def test_mcts_takes_win_and_block():
    agent = jax.jit(uct.make_mcts_agent(200))
    np.testing.assert_array_equal(agent(KEY, _batch(WIN_IN_ONE, 4)), 0)
    np.testing.assert_array_equal(agent(KEY, _batch(BLOCK_IN_ONE, 4)), 1)
