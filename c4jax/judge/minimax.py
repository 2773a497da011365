"""Fixed-depth minimax (negamax) with a hand-written window-counting heuristic at the
leaves: the ``minimax-D`` reference opponent.

``make_minimax_agent(depth)`` returns a jittable agent ``act(key, state[B]) -> [B] int32``.
Shapes: B batch, A = 7 actions.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from c4jax import env
from c4jax.baselines import argmax_random_ties, expand

A = env.NUM_ACTIONS


_WIN_SCORE = 100_000.0  # terminal value scale; quicker wins score higher
_WINDOW_WEIGHTS = np.array([0.0, 1.0, 4.0, 32.0, 0.0], dtype=np.float32)  # by stones in window
_CENTRE_WEIGHT = 3.0  # per own stone in the centre column
_CENTRE_LO = np.uint32(0x08080808)  # column 3, rows 0-3
_CENTRE_HI = np.uint32(0x0808)  # column 3, rows 4-5


def heuristic(state: env.State) -> jax.Array:
    """Static evaluation from the side of the player to move (live positions).

    Sums, over the 69 lines of four, ``w[k]`` for every line holding k of the
    mover's stones and none of the opponent's, minus the same for the opponent
    (w = 0, 1, 4, 32 for k = 0..3), plus 3 per own stone in the centre column
    minus 3 per opponent stone there.

    Args:
        state: positions of any batch shape S.

    Returns:
        [S] float32, well inside (-_WIN_SCORE, _WIN_SCORE).
    """
    w_lo, w_hi = env.LINE_LO, env.LINE_HI  # [69] the lines of four as bitboards
    popcount = jax.lax.population_count
    own_lo, own_hi = state.own_lo, state.own_hi
    opp_lo, opp_hi = state.all_lo ^ own_lo, state.all_hi ^ own_hi

    def counts(lo, hi):  # [S, 69] stones of one player in each window
        return (popcount(lo[..., None] & w_lo) + popcount(hi[..., None] & w_hi)).astype(jnp.int32)

    own = counts(own_lo, own_hi)
    opp = counts(opp_lo, opp_hi)
    weights = jnp.asarray(_WINDOW_WEIGHTS)
    score = jnp.sum(
        jnp.where(opp == 0, weights[own], 0.0) - jnp.where(own == 0, weights[opp], 0.0), axis=-1
    )
    centre = (popcount(own_lo & _CENTRE_LO) + popcount(own_hi & _CENTRE_HI)).astype(jnp.float32)
    centre_opp = (popcount(opp_lo & _CENTRE_LO) + popcount(opp_hi & _CENTRE_HI)).astype(jnp.float32)
    return score + _CENTRE_WEIGHT * (centre - centre_opp)


def _terminal_value(state: env.State, remaining: int) -> jax.Array:
    """[S] value of a finished position for the (nominal) player to move.

    A won game was won by the player who just moved, so it is a loss here;
    ``remaining`` (plies of search left) rewards quicker wins / slower losses.
    """
    lost = state.winner != -1
    return jnp.where(lost, -(_WIN_SCORE + remaining), 0.0).astype(jnp.float32)


def negamax_values(state: env.State, depth: int, leaf_chunk: int = 4096) -> jax.Array:
    """[S, A] negamax value of each root move, from the root mover's side.

    Full-width search: level d holds all 7^d move sequences as a dense batch.
    The last level is evaluated in chunks of ``leaf_chunk`` positions to bound
    memory. Illegal root moves get -inf.

    Args:
        state: [S] positions (S one batch dimension).
        depth: plies searched, >= 1.
        leaf_chunk: positions per chunk at the deepest level.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")

    def value(s: env.State, d: int) -> jax.Array:
        """[...] value of positions ``s`` for their mover, searching d more plies."""
        if d == 0:
            return jnp.where(s.terminated, _terminal_value(s, 0), heuristic(s))
        if d == 1:
            # Children are leaves: evaluate them in chunks of flattened positions.
            children = expand(s)  # [..., A]
            flat = jax.tree.map(lambda x: x.reshape(-1), children)
            n = flat.num_moves.shape[0]
            chunk = max(1, min(leaf_chunk, n))
            leaf = jax.lax.map(lambda c: value(c, 0), flat, batch_size=chunk)
            child_values = leaf.reshape(children.num_moves.shape)
        else:
            child_values = value(expand(s), d - 1)  # [..., A]
        legal = env.legal_action_mask(s)
        best = jnp.max(jnp.where(legal, -child_values, -jnp.inf), axis=-1)
        return jnp.where(s.terminated, _terminal_value(s, d), best)

    child_values = value(expand(state), depth - 1)  # [S, A]
    legal = env.legal_action_mask(state)
    return jnp.where(legal, -child_values, -jnp.inf)


def minimax_agent(key: jax.Array, state: env.State, *, depth: int = 5) -> jax.Array:
    """Depth-``depth`` negamax with the window heuristic, random tie-breaking.

    Args:
        key: PRNG key.
        state: [B] positions.
        depth: plies searched (the agent's move counts as one).

    Returns:
        [B] int32 columns.
    """
    values = negamax_values(state, depth)
    return argmax_random_ties(key, values, env.legal_action_mask(state))


def make_minimax_agent(depth: int = 5):
    """A depth-``depth`` minimax agent.

    Cost: 7^depth leaf evaluations per game and move (16,807 at depth 5), each
    scanning the 69 lines of four; memory ~ batch x 7^(depth-1) x 7 states.
    """
    return functools.partial(minimax_agent, depth=depth)
