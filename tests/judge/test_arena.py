"""Tests of the batched arena."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import env
from c4jax.baselines import lookahead_agent, random_agent
from c4jax.judge import arena, protocol


def test_lookahead_beats_random():
    result = arena.play_games(
        lookahead_agent, random_agent, jax.random.PRNGKey(0), 100
    )
    assert result.num_games == 100
    assert result.wins >= 90, str(result)


def test_result_bookkeeping_and_colours():
    result = arena.play_games(random_agent, random_agent, jax.random.PRNGKey(1), 51)
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


@pytest.mark.parametrize("opening_moves", [8, arena.MAX_OPENING_MOVES])
def test_no_game_is_decided_by_its_random_opening(opening_moves):
    """Uniformly random plies would end 2% of 8-ply openings and 46% of 20-ply ones
    in a win; the opening's plies never win, so every game is the agents' to decide."""
    start = arena._opening(jax.random.key(0), num_pairs=4000, opening_moves=opening_moves)
    assert not np.any(start.terminated)
    np.testing.assert_array_equal(start.num_moves, opening_moves)
    boards = zip(start.own_lo.tolist(), start.all_lo.tolist(), start.all_hi.tolist(), strict=True)
    assert len(set(boards)) > 2000  # and they vary

    def lowest_legal(key, state):
        del key
        return jnp.argmax(env.legal_action_mask(state), axis=-1).astype(jnp.int32)

    result = arena.play_games(lowest_legal, lowest_legal, jax.random.key(1), 200,
                              opening_moves=opening_moves)
    assert np.all(result.num_moves > opening_moves)


def test_partial_arrays_are_arguments_not_constants():
    """A partial with new array arguments reuses the compiled match."""

    def biased(bias, key, state):
        logits = jnp.where(env.legal_action_mask(state), bias, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    a1 = functools.partial(biased, jnp.zeros(7))
    a2 = functools.partial(biased, jnp.arange(7.0))
    before = len(protocol._cache)
    arena.play_games(a1, random_agent, jax.random.PRNGKey(0), 6)
    arena.play_games(a2, random_agent, jax.random.PRNGKey(0), 6)
    assert len(protocol._cache) == before + 1


def test_each_agent_is_traced_once_for_all_plies_and_for_the_next_match():
    """The loop body calls each agent at two plies, and an evaluation plays one agent
    against several opponents: its moves are traced once for all of that."""
    traced = []

    def counted(bias, key, state):
        traced.append(bias.shape)
        logits = jnp.where(env.legal_action_mask(state), bias, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    agent = functools.partial(counted, jnp.zeros(7))
    lost = arena.play_games(agent, lookahead_agent, jax.random.PRNGKey(0), 8)
    arena.play_games(agent, random_agent, jax.random.PRNGKey(1), 8)
    assert traced == [(7,)]
    assert lost.wins < lost.losses  # the traced agent really played (uniform vs lookahead)


def test_bad_arguments():
    with pytest.raises(ValueError):
        arena.play_games(random_agent, random_agent, jax.random.PRNGKey(0), 0)
    # play_match's messages name its own arguments (it said --games), and a batch that
    # cannot hold a pair is refused (-5 ran; 1 played 2 games at once).
    with pytest.raises(ValueError, match="num_games: got 0, allowed: a whole number >= 1"):
        arena.play_match(random_agent, random_agent, jax.random.PRNGKey(0), 0)
    for bad in (1, -5, 0, True, 2.5):
        with pytest.raises(ValueError, match="batch_size: got .*, allowed: a whole number >= 2"):
            arena.play_match(random_agent, random_agent, jax.random.PRNGKey(0), 6,
                             batch_size=bad)
    with pytest.raises(ValueError):
        arena.play_games(
            random_agent, random_agent, jax.random.PRNGKey(0), 2,
            opening_moves=arena.MAX_OPENING_MOVES + 1,
        )


def _host(agent):
    """A host agent that makes the same choices as a jittable one (on numpy positions)."""
    jitted = jax.jit(agent)

    def act(key, state):
        assert isinstance(state.num_moves, np.ndarray)  # host agents get numpy
        return np.asarray(jitted(key, state))

    return protocol.HostAgent(act)


@pytest.mark.parametrize("opening_moves", [0, 3])
def test_a_host_agent_plays_the_same_games_as_its_jitted_twin(opening_moves):
    key = jax.random.PRNGKey(5)
    jitted = arena.play_games(
        lookahead_agent, random_agent, key, 10, opening_moves=opening_moves
    )
    hosted = arena.play_games(
        _host(lookahead_agent), random_agent, key, 10, opening_moves=opening_moves
    )
    np.testing.assert_array_equal(hosted.outcomes, jitted.outcomes)
    np.testing.assert_array_equal(hosted.num_moves, jitted.num_moves)
    both = arena.play_games(_host(random_agent), _host(lookahead_agent), key, 4)
    assert both.num_games == 4


def test_play_match_counts_exactly_the_games_asked_for():
    result = arena.play_match(
        lookahead_agent, random_agent, jax.random.PRNGKey(2), 13, batch_size=4
    )
    assert result.num_games == 13 and result.outcomes.shape == (13,)
    assert result.a_first[0] and not result.a_first[1]
    summary = arena.match_summary(result)
    assert summary["games"] == 13
    assert summary["as_first"]["games"] + summary["as_second"]["games"] == 13
    for key in ("win", "draw", "loss"):
        low, high = summary[f"{key}_ci"]
        assert 0.0 <= low <= summary[f"{key}_rate"] <= high <= 1.0
    text = arena.format_match({"a": "A", "b": "B", "openings": 2, **summary})
    assert "A  vs  B: 13 games" in text and "95% CI" in text


def test_round_robin_plays_every_pair_once():
    pool = [("random", random_agent), ("lookahead", lookahead_agent),
            ("random2", random_agent)]
    played = arena.round_robin(pool, jax.random.PRNGKey(0), 4, batch_size=4)
    assert [(i, j) for i, j, _ in played] == [(0, 1), (0, 2), (1, 2)]
    assert all(result.num_games == 4 for _, _, result in played)


def test_an_observer_sees_every_ply_and_does_not_change_the_games():
    seen = []

    def observer(state, actions, is_a):
        seen.append((int(np.sum(~np.asarray(state.terminated))), np.asarray(actions).shape, is_a))

    key = jax.random.key(5)
    plain = arena.play_games(lookahead_agent, random_agent, key, 6, opening_moves=2)
    watched = arena.play_games(
        lookahead_agent, random_agent, key, 6, opening_moves=2, observer=observer
    )
    np.testing.assert_array_equal(plain.outcomes, watched.outcomes)
    np.testing.assert_array_equal(plain.num_moves, watched.num_moves)
    assert all(shape == (3,) for _, shape, _ in seen)  # a half-batch: 3 pairs
    live_plies = sum(live for live, _, _ in seen)
    assert live_plies == int(watched.num_moves.sum()) - 2 * 6  # all plies after the opening


@pytest.mark.parametrize("num_games,batch_size", [(13, 5), (7, 8), (30, 3)])
def test_an_observer_sees_the_moves_of_the_games_that_count_only(num_games, batch_size):
    """An odd batch plays whole pairs (one game fewer at once), an odd match drops its
    last b-first game and the last chunk its surplus: the observer (``match --judge``)
    sees agent A's moves in the counted games, as many as their lengths say."""
    seen = []

    def observer(state, actions, is_a):
        assert np.asarray(actions).shape[0] <= batch_size // 2  # a half-batch of pairs
        if is_a:
            seen.append(int(np.sum(~np.asarray(state.terminated))))

    result = arena.play_match(random_agent, random_agent, jax.random.key(4), num_games,
                              opening_moves=0, batch_size=batch_size, observer=observer)
    assert result.num_games == num_games
    moves_of_a = np.where(result.a_first, (result.num_moves + 1) // 2, result.num_moves // 2)
    assert sum(seen) == int(moves_of_a.sum())


@pytest.mark.parametrize("host", [False, True], ids=["jitted", "host"])
def test_every_opening_plays_each_two_ply_opening_once_in_each_colour(host):
    """98 games from the 49 two-ply openings: a-first and b-first games each start
    from all 49 distinct positions (checked on the starting positions)."""
    starts = arena._opening(jax.random.key(0), num_pairs=49, opening_moves=2, exhaustive=True)
    boards = np.asarray(env.observe(starts)).reshape(49, -1)
    assert len({b.tobytes() for b in boards}) == 49
    assert np.all(np.asarray(starts.num_moves) == 2)
    first = {True: [], False: []}

    def observer(state, actions, is_a):
        if int(np.asarray(state.num_moves).min()) == 2 and not first[is_a]:
            first[is_a].append(np.asarray(env.observe(state)).reshape(49, -1))

    result = arena.play_games(
        lookahead_agent, random_agent, jax.random.key(1), 98,
        opening_moves=2, every_opening=True, observer=observer if host else None,
    )
    assert result.num_games == 98 and np.all(result.num_moves >= 7)
    if host:
        for is_a in (True, False):
            assert {b.tobytes() for b in first[is_a][0]} == {b.tobytes() for b in boards}


def test_every_opening_is_limited_to_four_plies():
    with pytest.raises(ValueError, match=r"allowed: 0..4"):
        arena.play_games(random_agent, random_agent, jax.random.key(0), 2,
                         opening_moves=5, every_opening=True)


def _leftmost(key, state):
    """A deterministic agent: the leftmost legal column."""
    del key
    return jnp.argmax(env.legal_action_mask(state), axis=-1).astype(jnp.int32)


def test_every_opening_in_chunks_of_the_batch_size_plays_each_opening_once():
    """``--batch-size`` bounds the games at once of an every-opening match too (it was
    one chunk of all 2 * 7**K games, whatever the batch size): the chunks go on where
    the last one stopped, so the 98 games are those of the one-chunk match."""
    starts = {True: [], False: []}
    largest = []

    def observer(state, actions, is_a):
        moves = np.asarray(state.num_moves)
        largest.append(moves.shape[0])
        if moves.min() == 2:  # the chunk's first ply: the openings themselves
            starts[is_a].extend(b.tobytes() for b in
                                np.asarray(env.observe(state)).reshape(moves.shape[0], -1))

    chunked = arena.play_match(_leftmost, _leftmost, jax.random.key(3), 98, opening_moves=2,
                               batch_size=16, every_opening=True, observer=observer)
    whole = arena.play_match(_leftmost, _leftmost, jax.random.key(3), 98, opening_moves=2,
                             every_opening=True)
    assert max(largest) <= 8  # half of a chunk of at most 16 games
    for is_a in (True, False):
        assert len(starts[is_a]) == 49 and len(set(starts[is_a])) == 49
    np.testing.assert_array_equal(chunked.outcomes, whole.outcomes)
    np.testing.assert_array_equal(chunked.num_moves, whole.num_moves)
    np.testing.assert_array_equal(chunked.a_first, whole.a_first)


def test_a_progress_that_is_no_mode_is_refused():
    assert arena.progress_mode("lines") == "lines" and arena.progress_mode(False) == "off"
    with pytest.raises(ValueError, match="progress: got 'verbose', allowed: True, False"):
        arena.play_match(random_agent, random_agent, jax.random.PRNGKey(0), 2,
                         progress="verbose")
