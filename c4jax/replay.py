"""A fixed-capacity ring buffer of training positions that lives on the device.

Positions are stored as compact ``env.State`` bitboards rather than
observations (25 bytes instead of 336); ``sample`` rebuilds the ``[H, W, 2]``
planes and applies the left-right mirror augmentation. Shape letters: C
capacity, M positions added at once, B minibatch, A = 7 actions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from c4jax import env


@struct.dataclass
class Positions:
    """Training positions with their targets; leading dimension M (or C)."""

    state: env.State  # [M] positions (the search root)
    policy: jax.Array  # [M, A] float32 improved policy from the search
    value: jax.Array  # [M] float32 game result for the player to move: +1, 0, -1


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


def init(capacity: int) -> ReplayBuffer:
    """An empty buffer of ``capacity`` positions."""
    data = Positions(
        state=env.init_batch(capacity),
        policy=jnp.zeros((capacity, env.NUM_ACTIONS), jnp.float32),
        value=jnp.zeros((capacity,), jnp.float32),
    )
    return ReplayBuffer(data=data, insert=jnp.int32(0), size=jnp.int32(0))


def add(buffer: ReplayBuffer, positions: Positions, valid: jax.Array) -> ReplayBuffer:
    """Writes the valid rows of ``positions`` after the newest data, wrapping.

    Args:
        buffer: the buffer.
        positions: [M] candidate positions.
        valid: [M] bool, which rows to keep; the others are dropped.

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
    slot = jnp.where(keep, (buffer.insert + rank) % capacity, capacity)  # capacity: dropped

    def write(old, new):
        return old.at[slot].set(new, mode="drop")

    data = jax.tree.map(write, buffer.data, positions)
    return ReplayBuffer(
        data=data,
        insert=(buffer.insert + count) % capacity,
        size=jnp.minimum(buffer.size + count, capacity),
    )


def sample(
    buffer: ReplayBuffer, key: jax.Array, batch_size: int, *, mirror: bool = True
) -> Minibatch:
    """Draws ``batch_size`` filled slots uniformly (with replacement).

    Args:
        buffer: a buffer with ``size >= 1``.
        key: PRNG key.
        batch_size: B.
        mirror: reflect each example left-right (board and policy) with
            probability 1/2.

    Returns:
        A ``Minibatch`` of B examples.
    """
    index_key, mirror_key = jax.random.split(key)
    index = jax.random.randint(index_key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    picked = jax.tree.map(lambda x: x[index], buffer.data)
    obs = env.observe(picked.state)
    policy = picked.policy
    if mirror:
        flip = jax.random.bernoulli(mirror_key, 0.5, (batch_size,))
        obs = jnp.where(flip[:, None, None, None], env.mirror_observation(obs), obs)
        policy = jnp.where(flip[:, None], env.mirror_policy(policy), policy)
    return Minibatch(obs=obs, policy=policy, value=picked.value)
