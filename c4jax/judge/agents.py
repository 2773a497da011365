"""The jittable agents: baselines, and the network with or without search.

Every agent here is a pure function ``act(key, state[B]) -> [B] int32`` (a
jittable agent in the sense of ``protocol``). Agents carry their settings or
network variables with ``functools.partial`` so that the arena and the solver
pass the arrays as jit arguments instead of compiling them in as constants.
They are named by specs in ``registry``; this module knows nothing of specs.

Provided here:

* ``random_agent``: uniform over the legal moves.
* ``win_agent``: wins in one if it can, else plays uniformly at random (the
  "win-if-you-can" opponent of the DQN seed; it never blocks).
* ``lookahead_agent``: wins in one if it can, else blocks the opponent's win in
  one, else plays uniformly at random.
* ``make_mcts_agent(num_simulations)``: pure Monte Carlo tree search (UCT)
  whose leaf values are single random rollouts.
* ``make_minimax_agent(depth)``: full-width negamax to a fixed depth with a
  hand-written window-counting heuristic at the leaves.
* ``make_alphazero_act(apply_fn, search_config, num_simulations=...)``: the
  network and its search (no noise, best move), or the network alone.

Deterministic agents break ties between equally good moves uniformly at random
so that a match does not replay one game over and over.

Shapes: B batch of games, A = 7 actions.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from c4jax import env
from c4jax.alphazero import search
from c4jax.alphazero.config import SearchConfig
from c4jax.alphazero.network import ApplyFn

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


# --- Pure Monte Carlo tree search (UCT) with random rollouts. ---


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


# --- Fixed-depth minimax (negamax) with a window-counting heuristic. ---


def _window_masks() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 69 lines of four cells as bitboards and whether each uses column 3.

    Returns:
        ([69] uint32 lo words, [69] uint32 hi words, [69] int32 count of centre cells).
    """
    lo, hi, centre = [], [], []
    directions = ((0, 1), (1, 0), (1, 1), (1, -1))  # (d_row, d_col)
    for r in range(env.NUM_ROWS):
        for c in range(env.NUM_COLS):
            for dr, dc in directions:
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if not all(0 <= rr < env.NUM_ROWS and 0 <= cc < env.NUM_COLS for rr, cc in cells):
                    continue
                w_lo = w_hi = 0
                for rr, cc in cells:
                    if rr < 4:
                        w_lo |= 1 << (8 * rr + cc)
                    else:
                        w_hi |= 1 << (8 * (rr - 4) + cc)
                lo.append(w_lo)
                hi.append(w_hi)
                centre.append(sum(cc == 3 for _, cc in cells))
    return (
        np.array(lo, dtype=np.uint32),
        np.array(hi, dtype=np.uint32),
        np.array(centre, dtype=np.int32),
    )


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
    w_lo, w_hi, _ = _window_masks()
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

    if depth == 1:
        child_values = value(expand(state), 0)
    else:
        child_values = value(expand(state), depth - 1)
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


# --- The network, alone or with search. ---


def make_alphazero_act(
    apply_fn: ApplyFn, search_config: SearchConfig, *, num_simulations: int
) -> Callable[[dict, jax.Array, env.State], jax.Array]:
    """``act(variables, key, state[B]) -> [B] int32``: the search's best move, no noise.

    With ``num_simulations == 0`` it is the network alone (its highest-prior
    legal move). Bind the variables with ``functools.partial(act, variables)``
    to get an agent whose arrays the arena passes as jit arguments, so a new
    checkpoint of the same network reuses the compiled match.

    Args:
        apply_fn: ``(variables, obs [B, H, W, 2]) -> (logits [B, A], value [B])``.
        search_config: the run's search settings.
        num_simulations: simulations per move (replaces the config's), >= 0.
    """
    config = dataclasses.replace(search_config, num_simulations=num_simulations)
    search_fn = search.make_search(apply_fn, config)

    def act(variables, key, state):
        return search_fn(variables, key, state, evaluation=True).action

    return act
