"""Behaviour of pure Monte Carlo tree search (c4jax/judge/uct.py): random rollouts and the
MCTS agent."""

import jax
import numpy as np

from c4jax import baselines, env
from c4jax.judge import arena, uct

KEY = jax.random.PRNGKey(0)


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


def test_positions_are_as_drawn():
    assert env.render(env.from_moves(WIN_IN_ONE)).splitlines()[3:] == ["xo....."] * 3
    assert env.render(env.from_moves(BLOCK_IN_ONE)).splitlines()[3:] == [
        ".o.....",
        ".o.....",
        "xox.x..",
    ]


def test_rollout_value_range():
    values = np.asarray(uct.rollout_value(KEY, _batch("", 512)))
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}
    # The first player wins random playouts more often (about 55%).
    assert 0.0 < values.mean() < 0.3
    # A finished game scores 0.
    assert float(uct.rollout_value(KEY, _batch(WIN_IN_ONE + "1", 1))[0]) == 0.0


def test_mcts_only_plays_legal_moves():
    # Columns 1-3 (indices 0-2) full; a finished game in the batch must not break anything.
    near_full = env.from_moves("111111222222333333")
    finished = env.from_moves(WIN_IN_ONE + "1")
    batch = env.stack([near_full] * 30 + [finished] * 2)
    legal = np.asarray(env.legal_action_mask(batch))
    agent = jax.jit(uct.make_mcts_agent(16))
    for i in range(3):
        action = np.asarray(agent(jax.random.PRNGKey(i), batch))
        assert action.shape == (32,) and action.dtype == np.int32
        assert np.all((action >= 0) & (action < 7))
        assert np.all(legal[np.arange(30), action[:30]])


def test_mcts_1000_beats_random():
    """Acceptance: pure MCTS with 1000 rollouts wins at least 95 of 100 games (~40 s on 2 CPUs)."""
    result = arena.play_games(uct.make_mcts_agent(1000), baselines.random_agent, KEY, 100)
    assert result.wins >= 95, str(result)


def test_mcts_takes_win_and_block():
    agent = jax.jit(uct.make_mcts_agent(200))
    np.testing.assert_array_equal(agent(KEY, _batch(WIN_IN_ONE, 4)), 0)
    np.testing.assert_array_equal(agent(KEY, _batch(BLOCK_IN_ONE, 4)), 1)
