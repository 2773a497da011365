"""The fixed opponents every agent is measured against and the value-based learner trains
against: jittable, network-free, built on ``env`` alone.

Every agent here is a pure function ``act(key, state[B]) -> [B] int32`` (a
jittable agent in the sense of ``judge.protocol``):

* ``random_agent``: uniform over the legal moves.
* ``win_agent``: wins in one if it can, else plays uniformly at random (the
  "win-if-you-can" opponent of the DQN seed; it never blocks).
* ``lookahead_agent``: wins in one if it can, else blocks the opponent's win in
  one, else plays uniformly at random.

The searching baselines live in ``judge.uct`` (pure MCTS) and ``judge.minimax``;
the network's own agent is ``alphazero.search.make_alphazero_act``. Agents are
named by specs in ``judge.registry``; this module knows nothing of specs.
Deterministic choices break ties uniformly at random so that a match does not
replay one game over and over.

Shapes: B batch of games, A = 7 actions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from c4jax import env

A = env.NUM_ACTIONS


# --- Small helpers shared by the agents. ---


def uniform_choice(key: jax.Array, mask: jax.Array) -> jax.Array:
    """Samples uniformly among the True entries of each row of ``mask``.

    Args:
        key: PRNG key.
        mask: [B, A] bool; a row with no True entry samples over all A columns.

    Returns:
        [B] int32 column indices.
    """
    mask = jnp.where(jnp.any(mask, axis=-1, keepdims=True), mask, True)
    logits = jnp.where(mask, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


def argmax_random_ties(key: jax.Array, values: jax.Array, mask: jax.Array) -> jax.Array:
    """Best masked entry per row, ties broken uniformly at random.

    Args:
        key: PRNG key.
        values: [B, A] numbers, larger is better.
        mask: [B, A] bool, the entries allowed.

    Returns:
        [B] int32 column indices (a uniform column for an all-False row).
    """
    values = jnp.where(mask, values, -jnp.inf)
    best = jnp.max(values, axis=-1, keepdims=True)
    return uniform_choice(key, mask & (values == best))


def expand(state: env.State) -> env.State:
    """[S] state -> [S, A] children: the state after each of the A moves.

    Illegal moves (full columns) produce forfeited, terminated children and
    children of finished games are copies of their parent, as ``env.step`` says.
    """
    batched = jax.tree.map(lambda x: jnp.broadcast_to(x[..., None], (*x.shape, A)), state)
    actions = jnp.broadcast_to(jnp.arange(A, dtype=jnp.int32), batched.num_moves.shape)
    return env.step(batched, actions)


def swap_sides(state: env.State) -> env.State:
    """The same stones with the other player to move (a 'pass').

    Only for look-ahead tests such as "could the opponent win here at once";
    the result is not a position reachable in a real game.
    """
    return state.replace(
        own_lo=state.all_lo ^ state.own_lo,
        own_hi=state.all_hi ^ state.own_hi,
        num_moves=state.num_moves + 1,
    )


def winning_moves(state: env.State) -> jax.Array:
    """[S, A] bool: legal moves that win the game at once for the player to move."""
    children = expand(state)
    return env.legal_action_mask(state) & (children.winner == state.current_player[..., None])


# --- Random and one-move look-ahead. ---


def random_agent(key: jax.Array, state: env.State) -> jax.Array:
    """Uniformly random legal move.

    Args:
        key: PRNG key.
        state: [B] positions.

    Returns:
        [B] int32 columns.
    """
    return uniform_choice(key, env.legal_action_mask(state))


def win_agent(key: jax.Array, state: env.State) -> jax.Array:
    """Win-if-you-can: a move that wins at once if there is one, else uniformly random.

    Args:
        key: PRNG key.
        state: [B] positions.

    Returns:
        [B] int32 columns.
    """
    legal = env.legal_action_mask(state)  # [B, A]
    wins = winning_moves(state)  # [B, A]
    return uniform_choice(key, jnp.where(jnp.any(wins, axis=-1, keepdims=True), wins, legal))


def lookahead_agent(key: jax.Array, state: env.State) -> jax.Array:
    """One-move look-ahead: win at once, else block, else random.

    Blocking means playing a column in which the opponent, were it their move,
    would complete four in a row (found by stepping the side-swapped position).
    With several such threats one of them is blocked at random.

    Args:
        key: PRNG key.
        state: [B] positions.

    Returns:
        [B] int32 columns.
    """
    legal = env.legal_action_mask(state)  # [B, A]
    wins = winning_moves(state)  # [B, A]
    threats = legal & winning_moves(swap_sides(state))  # [B, A]
    mask = jnp.where(
        jnp.any(wins, axis=-1, keepdims=True),
        wins,
        jnp.where(jnp.any(threats, axis=-1, keepdims=True), threats, legal),
    )
    return uniform_choice(key, mask)
