"""A pool of surprising positions that new self-play games can start from.

Where the search moves the network's policy most (the policy surprise,
``selfplay.policy_surprise``), the network misjudges the position. Self-play
keeps the K most surprising positions of each chunk that have at most a given
number of stones (the opening stage, where the agent is weakest) in a ring of
P positions, and starts a share of its new games from them instead of from a
random opening: the positions it gets wrong come up again, with a fresh search
and a fresh game result, until it gets them right. Shape letters: P pool
positions, M candidate positions, N starts drawn.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from c4jax import env


@struct.dataclass
class StartPool:
    """A ring of P positions; slots ``[0, size)`` hold data, ``insert`` is the next write."""

    state: env.State  # [P] positions (empty boards where not yet written)
    surprise: jax.Array  # [P] float32 their policy surprise when kept (0 where empty)
    insert: jax.Array  # [] int32
    size: jax.Array  # [] int32


def init(size: int) -> StartPool:
    """An empty pool of ``size`` (P) positions."""
    return StartPool(
        state=env.init_batch(size),
        surprise=jnp.zeros((size,), jnp.float32),
        insert=jnp.int32(0),
        size=jnp.int32(0),
    )


def add(pool: StartPool, state: env.State, surprise: jax.Array, eligible: jax.Array,
        keep: int) -> StartPool:
    """Writes the ``keep`` most surprising eligible positions over the oldest.

    Args:
        pool: the pool.
        state: [M] candidate positions.
        surprise: [M] float32 their policy surprise.
        eligible: [M] bool, which may enter (fewer than ``keep`` is fine).
        keep: K <= min(M, P), the most positions written.
    """
    capacity = pool.surprise.shape[0]
    score = jnp.where(eligible, surprise, -jnp.inf)
    top, index = jax.lax.top_k(score, keep)  # [K], most surprising first
    ok = top > -jnp.inf
    count = jnp.sum(ok.astype(jnp.int32))
    rank = jnp.cumsum(ok.astype(jnp.int32)) - 1
    slot = jnp.where(ok, (pool.insert + rank) % capacity, capacity)  # capacity: dropped
    chosen = jax.tree.map(lambda x: x[index], state)

    def write(old, new):
        return old.at[slot].set(new, mode="drop")

    return StartPool(
        state=jax.tree.map(write, pool.state, chosen),
        surprise=write(pool.surprise, top),
        insert=(pool.insert + count) % capacity,
        size=jnp.minimum(pool.size + count, capacity),
    )


def draw(pool: StartPool, key: jax.Array, starts: env.State, moves: jax.Array,
         share: float) -> tuple[env.State, jax.Array, jax.Array]:
    """Replaces a share of ``starts`` with positions drawn uniformly from the pool.

    Args:
        pool: the pool; while it is empty every start stays.
        key: PRNG key.
        starts: [N] the games' starts otherwise (random openings).
        moves: [N] int32 the stones played before each start's game is searched.
        share: the chance that a start comes from the pool, in [0, 1].

    Returns:
        ``(starts [N], moves [N] int32, from_pool [N] bool)``: a start drawn
        from the pool has all its stones counted in ``moves`` (none of them is
        searched in its new game).
    """
    pick_key, index_key = jax.random.split(key)
    count = moves.shape[0]
    from_pool = (jax.random.uniform(pick_key, (count,)) < share) & (pool.size > 0)
    index = jax.random.randint(index_key, (count,), 0, jnp.maximum(pool.size, 1))
    chosen = jax.tree.map(lambda x: x[index], pool.state)
    starts = jax.tree.map(lambda new, old: jnp.where(from_pool, new, old), chosen, starts)
    moves = jnp.where(from_pool, chosen.num_moves.astype(moves.dtype), moves)
    return starts, moves, from_pool
