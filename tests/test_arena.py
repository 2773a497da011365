"""Tests of the batched arena."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import agents, arena, env


def test_lookahead_beats_random():
    result = arena.play_games(
        agents.lookahead_agent, agents.random_agent, jax.random.PRNGKey(0), 100
    )
    assert result.num_games == 100
    assert result.wins >= 90, str(result)


def test_result_bookkeeping_and_colours():
    result = arena.play_games(agents.random_agent, agents.random_agent, jax.random.PRNGKey(1), 51)
    assert result.num_games == 51
    assert result.outcomes.shape == (51,) and result.a_first.shape == (51,)
    assert result.wins == int(np.sum(result.outcomes == 1))
    assert result.losses == int(np.sum(result.outcomes == -1))
    assert result.a_first[0] and not result.a_first[1] and result.a_first[50]
    assert int(np.sum(result.a_first)) == 26
    assert np.all((result.num_moves >= 7) & (result.num_moves <= 42))
    assert result.score == pytest.approx((result.wins + result.draws / 2) / 51)
    low, high = result.score_ci
    assert 0.0 <= low <= result.score <= high <= 1.0


def test_colours_follow_the_first_mover():
    """An agent that always plays column 0 loses fast to one that stacks column 6
    when it moves second, and wins when it moves first (7 plies)."""

    def column(c, key, state):
        del key
        return jnp.full(state.num_moves.shape, c, jnp.int32)

    left = functools.partial(column, 0)
    right = functools.partial(column, 6)
    result = arena.play_games(left, right, jax.random.PRNGKey(0), 4)
    np.testing.assert_array_equal(result.outcomes, [1, -1, 1, -1])
    np.testing.assert_array_equal(result.num_moves, [7, 7, 7, 7])


def test_opening_is_shared_within_pairs_and_varies():
    """A deterministic agent against itself replays the pair's shared opening identically."""

    def lowest_legal(key, state):
        del key
        return jnp.argmax(env.legal_action_mask(state), axis=-1).astype(jnp.int32)

    result = arena.play_games(
        lowest_legal, lowest_legal, jax.random.PRNGKey(3), 40, opening_moves=6
    )
    pairs = result.outcomes.reshape(20, 2)
    np.testing.assert_array_equal(pairs[:, 0], -pairs[:, 1])  # same game, colours swapped
    lengths = result.num_moves.reshape(20, 2)
    np.testing.assert_array_equal(lengths[:, 0], lengths[:, 1])
    assert len(np.unique(lengths[:, 0])) > 1  # the openings differ between pairs


def test_partial_arrays_are_arguments_not_constants():
    """A partial with new array arguments reuses the compiled match."""

    def biased(bias, key, state):
        logits = jnp.where(env.legal_action_mask(state), bias, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    a1 = functools.partial(biased, jnp.zeros(7))
    a2 = functools.partial(biased, jnp.arange(7.0))
    before = len(arena._match_cache)
    arena.play_games(a1, agents.random_agent, jax.random.PRNGKey(0), 6)
    arena.play_games(a2, agents.random_agent, jax.random.PRNGKey(0), 6)
    assert len(arena._match_cache) == before + 1


def test_wilson_interval():
    low, high = arena.wilson_interval(50, 100)
    assert low == pytest.approx(0.4038, abs=1e-3) and high == pytest.approx(0.5962, abs=1e-3)
    low, high = arena.wilson_interval(100, 100)
    assert high == 1.0 and low == pytest.approx(0.963, abs=1e-3)
    assert arena.wilson_interval(0, 0) == (0.0, 1.0)


def test_bad_arguments():
    with pytest.raises(ValueError):
        arena.play_games(agents.random_agent, agents.random_agent, jax.random.PRNGKey(0), 0)
    with pytest.raises(ValueError):
        arena.play_games(
            agents.random_agent, agents.random_agent, jax.random.PRNGKey(0), 2, opening_moves=42
        )
