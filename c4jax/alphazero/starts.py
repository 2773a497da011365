"""A pool of surprising positions that new self-play games can start from.

Where the search moves the network's policy most (the policy surprise,
``selfplay.policy_surprise``), the network misjudges the position. Self-play
keeps the K most surprising positions of each chunk that have at most a given
number of stones (the opening stage, where the agent is weakest) in a ring of
P positions, and starts a share of its new games from them instead of from a
random opening: the positions it gets wrong come up again, with a fresh search
and a fresh game result, until it gets them right. A position enters only once
(not while it is in the pool, nor twice in one chunk), and only with a
surprise above 0. Shape letters: P pool positions, M candidate positions, K
positions kept at once, N starts drawn.
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


def _same_board(a: env.State, b: env.State) -> jax.Array:
    """[X, Y] bool: position i of ``a`` [X] is position j of ``b`` [Y]."""
    same = [x[:, None] == y[None, :] for x, y in
            ((a.own_lo, b.own_lo), (a.own_hi, b.own_hi), (a.all_lo, b.all_lo),
             (a.all_hi, b.all_hi))]
    return same[0] & same[1] & same[2] & same[3]


def add(pool: StartPool, state: env.State, surprise: jax.Array, eligible: jax.Array, *,
        keep: int) -> StartPool:
    """Writes the ``keep`` most surprising eligible new positions over the oldest.

    Args:
        pool: the pool.
        state: [M] candidate positions.
        surprise: [M] float32 their policy surprise.
        eligible: [M] bool, which may enter (fewer than ``keep`` is fine). A
            candidate with surprise 0, one already in the pool, and a repeat of a
            more surprising candidate do not enter.
        keep: K <= min(M, P), the most positions written.
    """
    capacity = pool.surprise.shape[0]
    score = jnp.where(eligible & (surprise > 0), surprise, -jnp.inf)
    top, index = jax.lax.top_k(score, keep)  # [K], most surprising first
    chosen = jax.tree.map(lambda x: x[index], state)
    ok = top > -jnp.inf
    filled = jnp.arange(capacity) < pool.size  # [P]
    in_pool = jnp.any(_same_board(chosen, pool.state) & filled[None, :], axis=1)
    earlier = jnp.arange(keep)[None, :] < jnp.arange(keep)[:, None]  # [K, K] j before i
    repeat = jnp.any(_same_board(chosen, chosen) & earlier & ok[None, :], axis=1)
    ok = ok & ~in_pool & ~repeat
    count = jnp.sum(ok.astype(jnp.int32))
    rank = jnp.cumsum(ok.astype(jnp.int32)) - 1
    slot = jnp.where(ok, (pool.insert + rank) % capacity, capacity)  # capacity: dropped

    def write(old, new):
        return old.at[slot].set(new, mode="drop")

    return StartPool(
        state=jax.tree.map(write, pool.state, chosen),
        surprise=write(pool.surprise, top),
        insert=(pool.insert + count) % capacity,
        size=jnp.minimum(pool.size + count, capacity),
    )


def draw(pool: StartPool, key: jax.Array, starts: env.State, moves: jax.Array, *,
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
