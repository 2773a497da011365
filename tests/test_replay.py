"""Replay buffer: wrap-around, dropping invalid rows, sampling, mirror augmentation."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from c4jax import env, replay


def _positions(values):
    """M positions whose value field carries an id, on distinct boards."""
    values = jnp.asarray(values, jnp.float32)
    m = values.shape[0]
    states = env.stack([env.from_moves(str(1 + i % 7)) for i in range(m)])
    policy = jnp.tile(jnp.arange(7, dtype=jnp.float32), (m, 1))
    return replay.Positions(state=states, policy=policy, value=values)


def test_add_keeps_only_valid_rows_in_order():
    buf = replay.init(8)
    buf = replay.add(buf, _positions([1, 2, 3, 4]), jnp.array([True, False, True, True]))
    assert int(buf.size) == 3 and int(buf.insert) == 3
    np.testing.assert_array_equal(buf.data.value[:3], [1, 3, 4])
    np.testing.assert_array_equal(buf.data.value[3:], 0)


def test_wraps_around_and_overwrites_oldest():
    buf = replay.init(5)
    buf = replay.add(buf, _positions([1, 2, 3, 4]), jnp.ones(4, bool))
    buf = replay.add(buf, _positions([5, 6, 7]), jnp.ones(3, bool))
    assert int(buf.size) == 5 and int(buf.insert) == 2
    np.testing.assert_array_equal(buf.data.value, [6, 7, 3, 4, 5])


def test_more_valid_rows_than_capacity_keeps_the_newest():
    buf = replay.init(3)
    buf = replay.add(buf, _positions([1, 2, 3, 4, 5]), jnp.ones(5, bool))
    assert int(buf.size) == 3
    assert sorted(np.asarray(buf.data.value).tolist()) == [3, 4, 5]


def test_samples_only_filled_slots():
    buf = replay.init(64)
    buf = replay.add(buf, _positions([7, 8, 9]), jnp.ones(3, bool))
    batch = jax.jit(replay.sample, static_argnums=2)(buf, jax.random.key(0), 512)
    assert set(np.asarray(batch.value).tolist()) == {7.0, 8.0, 9.0}


def test_mirror_maps_board_and_policy_together():
    # Column 1 (index 0) stone with policy mass on column index 0.
    state = env.stack([env.from_moves("1")])
    policy = jnp.array([[1.0, 0, 0, 0, 0, 0, 0]])
    buf = replay.add(
        replay.init(4), replay.Positions(state=state, policy=policy, value=jnp.ones(1)),
        jnp.ones(1, bool),
    )
    batch = replay.sample(buf, jax.random.key(1), 256, mirror=True)
    obs, pol = np.asarray(batch.obs), np.asarray(batch.policy)
    # The opponent's stone (plane 1, bottom row) sits in the column the policy points at
    # in the original (index 0) or the mirrored (index 6) example, never elsewhere.
    stone_col = obs[:, -1, :, 1].argmax(-1)
    np.testing.assert_array_equal(stone_col, pol.argmax(-1))
    flipped = (stone_col == 6).mean()
    assert 0.3 < flipped < 0.7
    unmirrored = replay.sample(buf, jax.random.key(1), 64, mirror=False)
    assert (np.asarray(unmirrored.obs)[:, -1, :, 1].argmax(-1) == 0).all()


def test_sharded_layout_deals_slots_out_to_the_shards_in_turn():
    """S = 2, C = 8: slots 0, 2, 4, 6 go to the first block of rows, 1, 3, 5, 7 to
    the second, so both shards fill at the same pace; slot order comes back."""
    buf = replay.add(replay.init(8), _positions([10, 11, 12, 13, 14]), jnp.ones(5, bool),
                     shards=2)
    np.testing.assert_array_equal(buf.data.value, [10, 12, 14, 0, 11, 13, 0, 0])
    ordered = replay.to_slot_order(buf, 2)
    np.testing.assert_array_equal(ordered.data.value, [10, 11, 12, 13, 14, 0, 0, 0])
    back = replay.from_slot_order(ordered, 2)
    chex.assert_trees_all_equal(back, buf)
    plain = replay.add(replay.init(8), _positions([10, 11, 12, 13, 14]), jnp.ones(5, bool))
    np.testing.assert_array_equal(plain.data.value, ordered.data.value)  # same slots


def test_each_shard_samples_only_its_filled_rows():
    buf = replay.add(replay.init(8), _positions([10, 11, 12, 13, 14]), jnp.ones(5, bool),
                     shards=2)
    drawn = []
    for shard in range(2):
        rows = jax.tree.map(lambda x, s=shard: x[4 * s: 4 * s + 4], buf.data)
        batch = replay.sample_shard(rows, buf.size, jnp.int32(shard), 2, jax.random.key(shard),
                                    256)
        drawn.append(set(np.asarray(batch.value).tolist()))
    assert drawn == [{10.0, 12.0, 14.0}, {11.0, 13.0}]


def test_one_shard_samples_as_the_whole_buffer_does():
    buf = replay.add(replay.init(8), _positions([1, 2, 3]), jnp.ones(3, bool))
    whole = replay.sample(buf, jax.random.key(3), 16)
    shard = replay.sample_shard(buf.data, buf.size, jnp.int32(0), 1, jax.random.key(3), 16)
    chex.assert_trees_all_equal(whole, shard)


def test_a_window_draws_only_the_newest_positions_across_the_wrap():
    """C = 5 after 7 positions (1..7) holds 3..7 with 6, 7 wrapped to the front;
    a window of 3 draws from 5, 6, 7 only, and each of them."""
    buf = replay.add(replay.init(5), _positions([1, 2, 3, 4]), jnp.ones(4, bool))
    buf = replay.add(buf, _positions([5, 6, 7]), jnp.ones(3, bool))
    batch = replay.sample(buf, jax.random.key(0), 512, window=jnp.int32(3))
    assert set(np.asarray(batch.value).tolist()) == {5.0, 6.0, 7.0}
    wide = replay.sample(buf, jax.random.key(0), 512, window=jnp.int32(1000))
    assert set(np.asarray(wide.value).tolist()) == {3.0, 4.0, 5.0, 6.0, 7.0}
    young = replay.add(replay.init(8), _positions([1, 2, 3]), jnp.ones(3, bool))
    newest = replay.sample(young, jax.random.key(1), 256, window=jnp.int32(2))
    assert set(np.asarray(newest.value).tolist()) == {2.0, 3.0}  # never an empty slot


def test_each_shard_draws_its_share_of_the_window():
    """S = 2, C = 8 after 11 positions (10..20): slots 8..10 (values 18, 19, 20)
    have wrapped over 10, 11, 12. A window of 4 is 17..20: shard 0 holds 18 and 20
    of them, shard 1 holds 17 and 19."""
    buf = replay.add(replay.init(8), _positions(list(range(10, 21))[:8]), jnp.ones(8, bool),
                     shards=2)
    buf = replay.add(buf, _positions([18, 19, 20]), jnp.ones(3, bool), shards=2)
    drawn = []
    for shard in range(2):
        rows = jax.tree.map(lambda x, s=shard: x[4 * s: 4 * s + 4], buf.data)
        batch = replay.sample_shard(rows, buf.size, jnp.int32(shard), 2, jax.random.key(shard),
                                    256, insert=buf.insert, window=jnp.int32(4))
        drawn.append(set(np.asarray(batch.value).tolist()))
    assert drawn == [{18.0, 20.0}, {17.0, 19.0}]


def test_the_window_grows_with_the_run_but_ever_more_slowly():
    sizes = [int(replay.window_size(jnp.int32(n), 100, 0.5)) for n in (0, 40, 100, 400, 10_000)]
    assert sizes == [1, 40, 100, 200, 1000]  # N, then 100 * (N / 100) ** 0.5
    assert int(replay.window_size(jnp.int32(5000), 100, 1.0)) == 5000  # power 1: everything


def test_the_reply_policy_is_mirrored_with_the_board():
    state = env.stack([env.from_moves("1")])
    policy = jnp.array([[1.0, 0, 0, 0, 0, 0, 0]])
    reply = jnp.array([[0, 1.0, 0, 0, 0, 0, 0]])
    buf = replay.init(4, next_policy=True)
    chex.assert_shape(buf.data.next_policy, (4, env.NUM_ACTIONS))
    buf = replay.add(
        buf, replay.Positions(state=state, policy=policy, value=jnp.ones(1), next_policy=reply),
        jnp.ones(1, bool),
    )
    batch = replay.sample(buf, jax.random.key(1), 256, mirror=True)
    pol, nxt = np.asarray(batch.policy).argmax(-1), np.asarray(batch.next_policy).argmax(-1)
    assert set(pol.tolist()) == {0, 6}  # both orientations were drawn
    np.testing.assert_array_equal(nxt, np.where(pol == 0, 1, 5))  # and flipped together
    assert replay.init(4).data.next_policy is None


def test_the_final_board_is_mirrored_with_the_board():
    # Position "1" (o to move) whose game ended "1212121": the mover's (o's) stones
    # in column 2, x's in column 1; the board and its final board flip together.
    from c4jax.alphazero import selfplay

    state = env.stack([env.from_moves("1")])
    end = env.from_moves("1212121")
    first = selfplay.first_player_words(env.stack([end]))
    own_lo, own_hi = first[:, 0] ^ first[:, 2], first[:, 1] ^ first[:, 3]  # o's stones
    final = jnp.stack([own_lo, own_hi, first[:, 2], first[:, 3]], axis=-1)
    buf = replay.init(4, final_board=True)
    chex.assert_shape(buf.data.final_board, (4, 4))
    buf = replay.add(buf, replay.Positions(state=state, policy=jax.nn.one_hot(jnp.array([1]), 7),
                                           value=jnp.ones(1), final_board=final),
                     jnp.ones(1, bool))
    batch = replay.sample(buf, jax.random.key(3), 256, mirror=True)
    board = np.asarray(batch.final_board)  # [B, H, W, 3]
    chex.assert_shape(board, (256, env.NUM_ROWS, env.NUM_COLS, 3))
    np.testing.assert_array_equal(board.sum(-1), 1.0)  # one-hot cells
    x_column = np.asarray(batch.obs)[:, -1, :, 1].argmax(-1)  # the opponent's stone: x's
    assert set(x_column.tolist()) == {0, 6}  # both orientations were drawn
    for example, column in zip(board, x_column, strict=True):
        o_column = 1 if column == 0 else 5
        np.testing.assert_array_equal(example[:, column, 1], [0, 0, 1, 1, 1, 1])  # x: 4 high
        np.testing.assert_array_equal(example[:, o_column, 0], [0, 0, 0, 1, 1, 1])  # o: 3
        assert example[..., 2].sum() == 42 - 7
    assert replay.init(4).data.final_board is None


def test_loss_weights_travel_with_their_positions():
    state = env.stack([env.from_moves("1"), env.from_moves("2")])
    policy = jax.nn.one_hot(jnp.array([0, 3]), env.NUM_ACTIONS)
    buf = replay.init(4, weight=True)
    np.testing.assert_array_equal(np.asarray(buf.data.weight), np.ones(4))
    buf = replay.add(buf, replay.Positions(state=state, policy=policy, value=jnp.ones(2),
                                           weight=jnp.array([0.25, 3.0])), jnp.ones(2, bool))
    batch = replay.sample(buf, jax.random.key(2), 256, mirror=True)
    pol, weight = np.asarray(batch.policy).argmax(-1), np.asarray(batch.weight)
    assert set(pol.tolist()) == {0, 6, 3}  # both positions, mirrored too
    np.testing.assert_array_equal(weight, np.where(pol == 3, 3.0, 0.25))
    assert replay.init(4).data.weight is None


def _staged(opening, endgame, endgame_stones=30):
    """Positions with one stone (values ``opening``) then positions marked as having
    ``endgame_stones`` stones (values ``endgame``): only the stone count is read."""
    pos = _positions(list(opening) + list(endgame))
    stones = jnp.asarray([1] * len(opening) + [endgame_stones] * len(endgame), jnp.int32)
    return pos.replace(state=pos.state.replace(num_moves=stones))


def test_endgame_positions_are_drawn_in_proportion_to_their_weight():
    """Four opening and four endgame positions: with the endgame weighed 0.25, an
    endgame draw has probability 4 * 0.25 / (4 * 0.25 + 4) = 0.2, against 0.5 uniform."""
    buf = replay.add(replay.init(16), _staged([1, 2, 3, 4], [11, 12, 13, 14]),
                     jnp.ones(8, bool))
    draw = jax.jit(replay.sample, static_argnames=("batch_size", "endgame"))
    weighted = np.asarray(draw(buf, jax.random.key(0), batch_size=8192,
                               endgame=(29, 0.25)).value)
    uniform = np.asarray(draw(buf, jax.random.key(0), batch_size=8192).value)
    assert set(weighted.tolist()) == set(uniform.tolist()) == {1, 2, 3, 4, 11, 12, 13, 14}
    assert abs(np.mean(weighted > 10) - 0.2) < 0.03  # binomial sd 0.0044
    assert abs(np.mean(uniform > 10) - 0.5) < 0.03
    # Within each stage the draws stay uniform.
    counts = np.bincount(weighted.astype(int), minlength=15)
    assert counts[[1, 2, 3, 4]].min() > 0.8 * counts[[1, 2, 3, 4]].max()
    assert counts[[11, 12, 13, 14]].min() > 0.7 * counts[[11, 12, 13, 14]].max()


def test_the_endgame_starts_at_its_stone_count():
    """A position with exactly ``stones`` stones is endgame; one fewer is not."""
    buf = replay.add(replay.init(8), _staged([1], [11], endgame_stones=29), jnp.ones(2, bool))
    at = np.asarray(replay.sample(buf, jax.random.key(2), 4096, endgame=(29, 0.25)).value)
    above = np.asarray(replay.sample(buf, jax.random.key(2), 4096, endgame=(30, 0.25)).value)
    assert abs(np.mean(at == 11) - 0.2) < 0.03  # 0.25 / (0.25 + 1)
    assert abs(np.mean(above == 11) - 0.5) < 0.03


def test_an_all_endgame_buffer_still_fills_the_minibatch():
    buf = replay.add(replay.init(8), _staged([], [11, 12, 13]), jnp.ones(3, bool))
    batch = replay.sample(buf, jax.random.key(3), 256, endgame=(29, 0.1))
    assert batch.value.shape == (256,) and set(np.asarray(batch.value).tolist()) == {11, 12, 13}
    assert replay.endgame_candidates(0.1) == 8 and replay.endgame_candidates(0.5) == 4
    assert replay.endgame_candidates(0.99) == 3


def test_a_shard_weighs_the_endgame_within_its_window():
    """S = 2, C = 8 after 12 positions: the window of the newest 4 (values 19..22) holds
    19 and 21 in shard 0; 21 is endgame, weighed 0.25: drawn 0.2 of the time."""
    first = _staged([11, 12, 13, 14, 15, 16, 17, 18], [])
    newest = _staged([19, 20], [21, 22])
    buf = replay.add(replay.init(8), first, jnp.ones(8, bool), shards=2)
    buf = replay.add(buf, newest, jnp.ones(4, bool), shards=2)
    rows = jax.tree.map(lambda x: x[:4], buf.data)
    batch = replay.sample_shard(rows, buf.size, jnp.int32(0), 2, jax.random.key(4), 4096,
                                insert=buf.insert, window=jnp.int32(4), endgame=(29, 0.25))
    values = np.asarray(batch.value)
    assert set(values.tolist()) == {19.0, 21.0}
    assert abs(np.mean(values == 21) - 0.2) < 0.03
