"""Pure Monte Carlo tree search (UCT) whose leaf values are single random rollouts: the
``mcts-N`` reference opponent.

``make_mcts_agent(num_simulations)`` returns a jittable agent
``act(key, state[B]) -> [B] int32``. Shapes: B batch, A = 7 actions, N nodes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import struct

from c4jax import env
from c4jax.baselines import argmax_random_ties, random_agent, uniform_choice

A = env.NUM_ACTIONS


def rollout_value(key: jax.Array, state: env.State) -> jax.Array:
    """Result of one uniformly random playout, from the side of the player to move.

    Args:
        key: PRNG key.
        state: positions of any batch shape S (finished ones are allowed and score 0).

    Returns:
        [S] float32 in {-1, 0, 1}: +1 if the player to move in ``state`` wins
        the playout, -1 if it loses, 0 for a draw or an already finished game.
    """

    def cond(carry):
        _, s = carry
        return jnp.any(~s.terminated)

    def body(carry):
        k, s = carry
        k, sub = jax.random.split(k)
        return k, env.step(s, random_agent(sub, s))

    _, final = jax.lax.while_loop(cond, body, (key, state))
    value = env.result_value(final.winner, state.current_player)
    return jnp.where(state.terminated, 0.0, value).astype(jnp.float32)


@struct.dataclass
class UCTTree:
    """Search tree of one game (vmap adds the batch dimension B in front).

    Node 0 is the root; N = num_simulations + 1. Positions are not stored:
    the descent replays moves from the root. Values are from the side of the
    player who made the move leading into the node (the parent's mover).
    """

    children: jax.Array  # [N, A] int32 child node index, -1 if not expanded
    parent: jax.Array  # [N] int32, -1 for the root
    visits: jax.Array  # [N] int32
    value_sum: jax.Array  # [N] float32
    num_nodes: jax.Array  # [] int32, nodes in use


def _uct_search(key: jax.Array, root: env.State, num_simulations: int, uct_c: float) -> UCTTree:
    """UCT on one game (unbatched ``root``); vmap for a batch.

    Every simulation descends from the root by UCB1 (``Q + c sqrt(ln N / n)``,
    Q the child's mean value for the player choosing); at the first node with
    an unexpanded legal move it adds the child for one such move chosen at
    random, scores it by one random playout (or its result if terminal),
    and backs the value up with alternating signs. A simulation that reaches
    a finished position backs up its exact result.
    """
    num_nodes_max = num_simulations + 1
    tree = UCTTree(
        children=jnp.full((num_nodes_max, A), -1, jnp.int32),
        parent=jnp.full((num_nodes_max,), -1, jnp.int32),
        visits=jnp.zeros((num_nodes_max,), jnp.int32),
        value_sum=jnp.zeros((num_nodes_max,), jnp.float32),
        num_nodes=jnp.int32(1),
    )

    def simulate(i, tree):
        k_sim = jax.random.fold_in(key, i)
        k_pick, k_roll = jax.random.split(k_sim)

        # Selection: walk down fully expanded nodes.
        def descend_cond(carry):
            _, state, stop = carry
            return ~stop & ~state.terminated

        def descend_body(carry):
            node, state, _ = carry
            legal = env.legal_action_mask(state)  # [A]
            kids = tree.children[node]  # [A]
            unexpanded = legal & (kids < 0)
            stop = jnp.any(unexpanded)
            kid_visits = tree.visits[jnp.maximum(kids, 0)].astype(jnp.float32)
            kid_q = tree.value_sum[jnp.maximum(kids, 0)] / jnp.maximum(kid_visits, 1.0)
            log_n = jnp.log(jnp.maximum(tree.visits[node], 1).astype(jnp.float32))
            ucb = kid_q + uct_c * jnp.sqrt(log_n / jnp.maximum(kid_visits, 1.0))
            action = jnp.argmax(jnp.where(legal, ucb, -jnp.inf))
            child = kids[action]
            next_node = jnp.where(stop, node, child)
            next_state = jax.tree.map(
                lambda a, b: jnp.where(stop, a, b), state, env.step(state, action)
            )
            return next_node, next_state, stop

        node, state, _ = jax.lax.while_loop(
            descend_cond, descend_body, (jnp.int32(0), root, jnp.bool_(False))
        )

        # Expansion of one random unexpanded legal move (none at a finished position).
        unexpanded = env.legal_action_mask(state) & (tree.children[node] < 0)
        expand_now = jnp.any(unexpanded)
        action = uniform_choice(k_pick, unexpanded[None])[0]
        new = tree.num_nodes
        child_state = env.step(state, action)
        # Value for the player who moved into the leaf.
        leaf_state = jax.tree.map(lambda a, b: jnp.where(expand_now, a, b), child_state, state)
        rollout = -rollout_value(k_roll, leaf_state)
        value = jnp.where(
            leaf_state.terminated, (leaf_state.winner != -1).astype(jnp.float32), rollout
        )
        leaf = jnp.where(expand_now, new, node)
        tree = tree.replace(
            children=tree.children.at[node, action].set(
                jnp.where(expand_now, new, tree.children[node, action])
            ),
            parent=tree.parent.at[new].set(jnp.where(expand_now, node, tree.parent[new])),
            num_nodes=tree.num_nodes + expand_now.astype(jnp.int32),
        )

        # Backup with alternating signs.
        def backup_cond(carry):
            n, _, _ = carry
            return n >= 0

        def backup_body(carry):
            n, v, t = carry
            t = t.replace(visits=t.visits.at[n].add(1), value_sum=t.value_sum.at[n].add(v))
            return t.parent[n], -v, t

        _, _, tree = jax.lax.while_loop(backup_cond, backup_body, (leaf, value, tree))
        return tree

    return jax.lax.fori_loop(0, num_simulations, simulate, tree)


def mcts_agent(
    key: jax.Array, state: env.State, *, num_simulations: int = 1000, uct_c: float = 2.0
) -> jax.Array:
    """Pure MCTS: UCT with random-rollout values; plays the most visited move.

    Args:
        key: PRNG key.
        state: [B] positions.
        num_simulations: simulations (one playout each) per move.
        uct_c: UCB1 exploration constant for values in [-1, 1] (2 as in OpenSpiel).

    Returns:
        [B] int32 columns, ties in visits broken at random.
    """
    k_search, k_tie = jax.random.split(key)
    batch = state.num_moves.shape[0]
    search = functools.partial(_uct_search, num_simulations=num_simulations, uct_c=uct_c)
    tree = jax.vmap(search)(jax.random.split(k_search, batch), state)
    kids = tree.children[:, 0]  # [B, A]
    visits = jnp.take_along_axis(tree.visits, jnp.maximum(kids, 0), axis=1)
    visits = jnp.where(kids >= 0, visits, 0).astype(jnp.float32)
    return argmax_random_ties(k_tie, visits, env.legal_action_mask(state))


def make_mcts_agent(num_simulations: int = 1000, uct_c: float = 2.0):
    """A pure-MCTS (UCT, random rollouts) agent with ``num_simulations`` per move.

    Cost: each simulation runs one random playout (up to 42 env steps), so a
    move costs about ``num_simulations`` sequential playouts over the batch.
    """
    return functools.partial(mcts_agent, num_simulations=num_simulations, uct_c=uct_c)
