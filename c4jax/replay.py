"""A fixed-capacity ring buffer of training positions that lives on the device.

Positions are stored as compact ``env.State`` bitboards rather than
observations (25 bytes instead of 336); ``sample`` rebuilds the ``[H, W, 2]``
planes and applies the left-right mirror augmentation. Shape letters: C
capacity, M positions added at once, B minibatch, A = 7 actions, S shards.

Sharded over S devices (rows split in S equal blocks), the buffer deals its
slots out in turn: slot i (the i-th position added, modulo C) is stored in
row ``(i % S) * (C / S) + i // S``, so every shard fills at the same pace and
each device can sample its own rows (``sample_shard``) without moving data.
With S = 1 slot i is row i. ``to_slot_order`` and ``from_slot_order`` convert
between this layout and slot order (the form checkpoints keep, so that a run
can resume on another number of devices).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import struct

from c4jax import env


@struct.dataclass
class Positions:
    """Training positions with their targets; leading dimension M (or C)."""

    state: env.State  # [M] positions (the search root)
    policy: jax.Array  # [M, A] float32 improved policy from the search
    value: jax.Array  # [M] float32 value target for the player to move, in [-1, 1] (selfplay)
    # [M, A] float32 the next position's search policy (the opponent's reply), all
    # zeros where the game ended with this move; None unless the network predicts it.
    next_policy: jax.Array | None = None
    # [M] float32 the position's loss weight (policy surprise weighting, mean 1);
    # None unless the run weighs positions.
    weight: jax.Array | None = None
    # [M, 4] uint32 the board its game ended with, as ``env.State``'s words from
    # the side of the position's mover (own_lo, own_hi, all_lo, all_hi); None
    # unless the network predicts it.
    final_board: jax.Array | None = None


@struct.dataclass
class ReplayBuffer:
    """Ring buffer; slots ``[0, size)`` hold data, ``insert`` is the next write."""

    data: Positions  # [C] (any pytree of [C, ...] arrays: ``add`` is generic)
    insert: jax.Array  # [] int32
    size: jax.Array  # [] int32

    @property
    def capacity(self) -> int:
        return jax.tree.leaves(self.data)[0].shape[0]


@struct.dataclass
class Minibatch:
    """Network-ready training examples."""

    obs: jax.Array  # [B, H, W, 2] float32
    policy: jax.Array  # [B, A] float32
    value: jax.Array  # [B] float32
    next_policy: jax.Array | None = None  # [B, A] float32, as in ``Positions``
    weight: jax.Array | None = None  # [B] float32 loss weights, as in ``Positions``
    # [B, H, W, 3] float32 one-hot: each cell of the game's final board holds the
    # mover's stone, the opponent's, or none (``final_board_planes``).
    final_board: jax.Array | None = None


def final_board_planes(words: jax.Array) -> jax.Array:
    """[..., 4] uint32 ``Positions.final_board`` -> [..., H, W, 3] float32 one-hot
    planes: the mover's stones, the opponent's, the empty cells."""
    stones = env.stone_planes(*(words[..., i] for i in range(4)))  # [..., H, W, 2]
    return jnp.concatenate([stones, 1.0 - jnp.sum(stones, axis=-1, keepdims=True)], axis=-1)


def init(capacity: int, *, next_policy: bool = False, weight: bool = False,
         final_board: bool = False) -> ReplayBuffer:
    """An empty buffer of ``capacity`` positions (with ``Positions.next_policy``
    when ``next_policy``, ``Positions.weight`` when ``weight``,
    ``Positions.final_board`` when ``final_board``)."""
    data = Positions(
        state=env.init_batch(capacity),
        policy=jnp.zeros((capacity, env.NUM_ACTIONS), jnp.float32),
        value=jnp.zeros((capacity,), jnp.float32),
        next_policy=jnp.zeros((capacity, env.NUM_ACTIONS), jnp.float32) if next_policy else None,
        weight=jnp.ones((capacity,), jnp.float32) if weight else None,
        final_board=jnp.zeros((capacity, 4), jnp.uint32) if final_board else None,
    )
    return ReplayBuffer(data=data, insert=jnp.int32(0), size=jnp.int32(0))


def stored_row(slot: jax.Array, capacity: int, shards: int) -> jax.Array:
    """The row where slot ``slot`` (any int array, values in [0, C)) is stored."""
    if shards == 1:
        return slot
    return (slot % shards) * (capacity // shards) + slot // shards


def add(
    buffer: ReplayBuffer, positions: Positions, valid: jax.Array, *, shards: int = 1
) -> ReplayBuffer:
    """Writes the valid rows of ``positions`` after the newest data, wrapping.

    Args:
        buffer: the buffer.
        positions: [M] candidate positions.
        valid: [M] bool, which rows to keep; the others are dropped.
        shards: S, the layout (see the module); C must divide by it.

    Returns:
        The buffer with ``sum(valid)`` more positions (the oldest overwritten
        once full). If more valid rows than the capacity arrive, the last
        ``capacity`` of them are kept.
    """
    capacity = buffer.capacity
    valid = valid.astype(jnp.int32)
    count = jnp.sum(valid)
    rank = jnp.cumsum(valid) - 1  # [M] position among the valid rows
    keep = (valid == 1) & (rank >= count - capacity)
    row = stored_row((buffer.insert + rank) % capacity, capacity, shards)
    slot = jnp.where(keep, row, capacity)  # capacity: dropped

    def write(old, new):
        return old.at[slot].set(new, mode="drop")

    data = jax.tree.map(write, buffer.data, positions)
    return ReplayBuffer(
        data=data,
        insert=(buffer.insert + count) % capacity,
        size=jnp.minimum(buffer.size + count, capacity),
    )


def window_size(searched: jax.Array, start: int, power: float) -> jax.Array:
    """How many of the newest positions a growing replay window spans.

    KataGo's sublinear window: all ``searched`` positions while there are at
    most ``start`` of them, then ``start * (searched / start) ** power``, so the
    window keeps growing but the share of old data it holds shrinks.

    Args:
        searched: [] number, positions searched so far in the run (N); a
            float, so that a long run's count does not wrap around in int32.
        start: the window's size where it starts growing more slowly (> 0).
        power: in (0, 1]; 1 is the whole history.

    Returns:
        [] int32, at least 1 (and at most 2**31 - 128).
    """
    n = jnp.maximum(jnp.asarray(searched, jnp.float32), 1.0)
    grown = start * (n / start) ** power
    return jnp.clip(jnp.where(n <= start, n, grown), 1.0, 2.0**31 - 128).astype(jnp.int32)


def sample(
    buffer: ReplayBuffer, key: jax.Array, batch_size: int, *, mirror: bool = True,
    window: jax.Array | None = None, endgame: tuple[int, float] | None = None,
) -> Minibatch:
    """Draws ``batch_size`` filled slots (with replacement), uniformly unless ``endgame``.

    Args:
        buffer: a buffer with ``size >= 1``.
        key: PRNG key.
        batch_size: B.
        mirror: reflect each example left-right (board and policy) with
            probability 1/2.
        window: [] int, draw only from the newest ``window`` positions (all
            filled slots when it is larger, or when None).
        endgame: ``(stones, weight)`` with weight in (0, 1): draw a position
            with at least ``stones`` stones with probability proportional to
            ``weight``, any other with probability proportional to 1 (None:
            uniform). Drawn by rejection from ``endgame_candidates(weight)``
            uniform candidates per example, the first B accepted kept; were
            fewer accepted (a buffer almost all endgame), the rest are
            rejected candidates, so the weighting is then a little weaker.

    Returns:
        A ``Minibatch`` of B examples.
    """
    if window is None:
        return _draw(buffer.data, buffer.size, key, batch_size, mirror, endgame=endgame)
    return _draw(buffer.data, buffer.size, key, batch_size, mirror,
                 newest=(buffer.insert, window), endgame=endgame)


def endgame_candidates(weight: float) -> int:
    """Uniform candidates drawn per example for an endgame ``weight`` < 1:
    ``ceil(2 / weight)`` clipped to 2..8, so for a weight of 0.25 or more twice the
    candidates an all-endgame buffer needs on average per accepted one."""
    return min(8, max(2, math.ceil(2.0 / weight)))


def sample_shard(
    data: Positions,
    size: jax.Array,
    shard: jax.Array,
    shards: int,
    key: jax.Array,
    batch_size: int,
    *,
    mirror: bool = True,
    insert: jax.Array | None = None,
    window: jax.Array | None = None,
    endgame: tuple[int, float] | None = None,
) -> Minibatch:
    """``sample`` within one shard of a buffer written with ``add(..., shards=S)``.

    Args:
        data: [C / S] the rows of shard ``shard``.
        size: [] int32 the whole buffer's ``size`` (>= S: every shard holds a
            position; an empty shard's draws are its unwritten rows).
        shard: [] int32 which shard, 0..S-1.
        shards: S.
        key: PRNG key (its own per shard).
        batch_size: examples drawn from this shard.
        mirror: as in ``sample``.
        insert: [] int32 the whole buffer's ``insert``; needed with ``window``.
        window: [] int, as in ``sample``: the shard draws from its share of the
            newest ``window`` positions (``ceil(window / S)`` of its rows).
        endgame: as in ``sample``, within the shard.

    Returns:
        A ``Minibatch`` of ``batch_size`` examples, uniform over the filled rows
        of the shard (their counts differ by at most one between shards).
    """
    filled = size // shards + (shard < size % shards).astype(size.dtype)
    if window is None:
        return _draw(data, filled, key, batch_size, mirror, endgame=endgame)
    if insert is None:
        raise ValueError("sample_shard: a window needs the buffer's insert")
    # The shard's next row to write: how many slots below `insert` it holds.
    local_insert = (insert - shard + shards - 1) // shards
    local_window = (window + shards - 1) // shards
    return _draw(data, filled, key, batch_size, mirror, newest=(local_insert, local_window),
                 endgame=endgame)


def _draw(data: Positions, filled: jax.Array, key, batch_size: int, mirror: bool,
          newest: tuple[jax.Array, jax.Array] | None = None,
          endgame: tuple[int, float] | None = None) -> Minibatch:
    """B examples drawn uniformly from rows ``[0, filled)`` of ``data``; with
    ``newest = (insert, window)``, from the ``min(window, filled)`` rows written
    last before row ``insert`` (wrapping); with ``endgame``, weighted as ``sample``
    says."""
    weighted = endgame is not None and endgame[1] < 1
    if weighted:
        index_key, mirror_key, accept_key = jax.random.split(key, 3)
    else:
        index_key, mirror_key = jax.random.split(key)
    draws = batch_size * endgame_candidates(endgame[1]) if weighted else batch_size
    if newest is None:
        index = jax.random.randint(index_key, (draws,), 0, jnp.maximum(filled, 1))
    else:
        insert, window = newest
        rows = jax.tree.leaves(data)[0].shape[0]
        span = jnp.clip(window, 1, jnp.maximum(filled, 1))
        back = jax.random.randint(index_key, (draws,), 0, span)
        index = (insert - 1 - back) % rows
    if weighted:
        stones, weight = endgame
        late = data.state.num_moves[index] >= stones  # [draws]
        accept = jax.random.uniform(accept_key, (draws,)) < jnp.where(late, weight, 1.0)
        # Accepted candidates first, each group in draw order; keep B.
        order = jnp.argsort(jnp.logical_not(accept).astype(jnp.int32), stable=True)
        index = index[order[:batch_size]]
    picked = jax.tree.map(lambda x: x[index], data)
    obs = env.observe(picked.state)
    policy, next_policy = picked.policy, picked.next_policy
    final = None if picked.final_board is None else final_board_planes(picked.final_board)
    if mirror:
        flip = jax.random.bernoulli(mirror_key, 0.5, (batch_size,))
        obs = jnp.where(flip[:, None, None, None], env.mirror_observation(obs), obs)
        policy = jnp.where(flip[:, None], env.mirror_policy(policy), policy)
        if next_policy is not None:
            next_policy = jnp.where(flip[:, None], env.mirror_policy(next_policy), next_policy)
        if final is not None:
            final = jnp.where(flip[:, None, None, None], env.mirror_observation(final), final)
    return Minibatch(obs=obs, policy=policy, value=picked.value, next_policy=next_policy,
                     weight=picked.weight, final_board=final)


def to_slot_order(buffer: ReplayBuffer, shards: int) -> ReplayBuffer:
    """The buffer with row i holding slot i (undoes the layout of ``add(..., shards)``)."""
    if shards == 1:
        return buffer
    rows = stored_row(jnp.arange(buffer.capacity), buffer.capacity, shards)
    return buffer.replace(data=jax.tree.map(lambda x: x[rows], buffer.data))


def from_slot_order(buffer: ReplayBuffer, shards: int) -> ReplayBuffer:
    """The inverse of ``to_slot_order``: a slot-ordered buffer in the layout of ``shards``."""
    if shards == 1:
        return buffer
    capacity = buffer.capacity
    block = capacity // shards
    row = jnp.arange(capacity)
    slots = (row % block) * shards + row // block  # the slot each row stores
    return buffer.replace(data=jax.tree.map(lambda x: x[slots], buffer.data))
