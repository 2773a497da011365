"""The start pool: keeps the most surprising positions, draws a share of starts from them."""

import jax
import jax.numpy as jnp
import numpy as np

from c4jax import env
from c4jax.alphazero import starts


def _positions(*moves):
    return env.stack([env.from_moves(m) for m in moves])


def test_add_keeps_the_most_surprising_eligible_positions_over_the_oldest():
    pool = starts.init(3)
    state = _positions("1", "12", "123", "1234", "12345")
    surprise = jnp.array([0.5, 3.0, 2.0, 9.0, 1.0])
    eligible = jnp.array([True, True, True, False, True])  # 9.0 may not enter
    pool = starts.add(pool, state, surprise, eligible, keep=2)
    assert int(pool.size) == 2 and int(pool.insert) == 2
    np.testing.assert_array_equal(np.asarray(pool.state.num_moves[:2]), [2, 3])  # 3.0, 2.0
    np.testing.assert_array_equal(np.asarray(pool.surprise), [3.0, 2.0, 0.0])
    # The next chunk: "12" is in the pool already and "123456" surprised nobody, so
    # "12345" and "1" enter; the ring wraps and the oldest ("12") is overwritten.
    state = _positions("12", "1", "12345", "123456")
    surprise = jnp.array([3.0, 0.5, 1.0, 0.0])
    pool = starts.add(pool, state, surprise, jnp.ones(4, bool), keep=3)
    np.testing.assert_array_equal(np.asarray(pool.surprise), [0.5, 2.0, 1.0])
    np.testing.assert_array_equal(np.asarray(pool.state.num_moves), [1, 3, 5])
    assert int(pool.size) == 3 and int(pool.insert) == 1


def test_a_position_repeated_in_one_chunk_enters_once():
    state = _positions("44", "4", "44")
    pool = starts.add(starts.init(4), state, jnp.array([1.0, 2.0, 3.0]), jnp.ones(3, bool),
                      keep=3)
    assert int(pool.size) == 2
    np.testing.assert_array_equal(np.asarray(pool.surprise[:2]), [3.0, 2.0])


def test_add_writes_nothing_for_missing_candidates():
    pool = starts.init(4)
    state = _positions("1", "12")
    pool = starts.add(pool, state, jnp.array([1.0, 2.0]), jnp.array([False, True]), keep=2)
    assert int(pool.size) == 1 and int(pool.insert) == 1
    assert int(pool.state.num_moves[0]) == 2 and int(pool.state.num_moves[1]) == 0


def test_draw_takes_a_share_of_the_starts_from_the_pool():
    pool = starts.add(starts.init(2), _positions("44", "444"), jnp.array([1.0, 2.0]),
                      jnp.ones(2, bool), keep=2)
    openings, moves = env.init_batch(1000), jnp.zeros((1000,), jnp.int32)
    drawn, drawn_moves, from_pool = starts.draw(pool, jax.random.key(0), openings, moves, share=0.3)
    from_pool = np.asarray(from_pool)
    assert 0.25 < from_pool.mean() < 0.35
    stones = np.asarray(drawn.num_moves)
    assert set(stones[from_pool].tolist()) == {2, 3} and (stones[~from_pool] == 0).all()
    np.testing.assert_array_equal(np.asarray(drawn_moves), stones)  # all counted as opening
    # An empty pool changes nothing, whatever the share.
    _, _, none = starts.draw(starts.init(2), jax.random.key(0), openings, moves, share=1.0)
    assert not np.asarray(none).any()
