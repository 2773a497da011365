"""Gumbel MuZero searches a ply or two deep, with their leaves evaluated together.

Shape glossary: B batch of games, A = 7 actions, V simulations per move, E
second-round simulations (after each considered move has one visit), G games
of a gathered subset.

Gumbel MuZero (``mctx.gumbel_muzero_policy``) runs sequential halving at the
root. With no more simulations than moves it considers (V <= m, e.g. the
presets' 4 simulations over 7 moves) every simulation visits a different root
move, the V best by ``gumbel + logits``: the Q-values returned by earlier
simulations cannot change that order, since the completed Q is the same for
every unvisited move. So the whole search is one ply deep and its V leaves are
known before any is evaluated; here they are evaluated in one network call of
V * B positions instead of mctx's V calls of B positions, which runs the
network faster per position on a CPU.

A game with fewer legal moves (m < V) visits each of them once and then, in
sequential halving's second round, some of them a second time. Where that
round gives each move at most one more visit (V = 4 and m = 2 or 3), the moves
it revisits depend only on the first round's Q-values, and below each the
search takes the child's highest-prior reply (the completed Q is again the
same for all of them): those leaves are evaluated in a second call, over at
most G = B / 16 such games gathered from the batch. Games whose search goes
deeper still (one legal move with V = 4) are searched by mctx itself, a few at
a time (with Gumbel noise drawn for them alone), and the whole batch is when
too many games need either.

Everything else follows mctx step for step (its backups, completed Q-values,
improved policy and final pick), so the result equals mctx's search to float
rounding; ``tests/alphazero/test_shallow.py`` checks it against mctx.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from c4jax import env

# A batch hands at most one game in this many to each gathered subset: the
# second-round games (one more network call) and the games mctx searches.
SUBSET_SHARE = 16


@struct.dataclass
class Searched:
    """What a Gumbel search leaves at the root, whichever way it ran."""

    action: jax.Array  # [B] int32 mctx's pick among the last survivors
    policy: jax.Array  # [B, A] float32 improved policy (mctx's action_weights)
    root_value: jax.Array  # [B] float32 mean of the root value and the V backed-up returns
    qvalues: jax.Array  # [B, A] float32 backed-up mean where visited, else 0
    visit_counts: jax.Array  # [B, A] int32
    # The network's evaluation of each expanded child, as the search stored it.
    child_logits: jax.Array  # [B, A, A] float32 masked prior logits (meaningless elsewhere)
    child_value: jax.Array  # [B, A] float32 value for the child's mover, 0 if it ended the game
    child_expanded: jax.Array  # [B, A] bool


MctxSearch = Callable[..., Searched]


def considered_visits(considered: int, num_simulations: int) -> tuple[int, ...]:
    """The root visit count sequential halving looks for at each simulation.

    mctx's ``seq_halving.get_sequence_of_considered_visits``: simulation i
    visits the best move (by ``gumbel + logits + sigma(q)``) among those with
    ``sequence[i]`` visits so far.
    """
    if considered <= 1:
        return tuple(range(num_simulations))
    log2max = math.ceil(math.log2(considered))
    sequence: list[int] = []
    visits = [0] * considered
    num_considered = considered
    while len(sequence) < num_simulations:
        extra = max(1, int(num_simulations / (log2max * num_considered)))
        for _ in range(extra):
            sequence.extend(visits[:num_considered])
            for i in range(num_considered):
                visits[i] += 1
        num_considered = max(2, num_considered // 2)
    return tuple(sequence[:num_simulations])


def second_round(num_simulations: int) -> tuple[int, ...]:
    """For m = 0..7 considered moves, the simulations after the first round when
    each revisits a different move once (0 where m >= V), else -1 (deeper)."""
    table = []
    for m in range(env.NUM_ACTIONS + 1):
        sequence = considered_visits(m, num_simulations)
        first, rest = sequence[:m], sequence[m:]
        shallow = m >= 1 and set(first) <= {0} and set(rest) <= {1} and len(rest) <= m
        table.append(len(rest) if shallow else -1)
    return tuple(table)


def _scores(gumbel: jax.Array, logits: jax.Array, sigma_q: jax.Array | float) -> jax.Array:
    """[B, A] mctx's ``seq_halving.score_considered`` before its visit penalty."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.maximum(-1e9, gumbel + logits + sigma_q)


def completed_qvalues(
    qvalues: jax.Array, visits: jax.Array, logits: jax.Array, value: jax.Array, *,
    c_visit: float, c_scale: float,
) -> jax.Array:
    """[B, A] mctx's ``qtransform_completed_by_mix_value`` (no rescaling) at a root.

    Args:
        qvalues: [B, A] float32 backed-up Q where visited.
        visits: [B, A] int32 root visits.
        logits: [B, A] float32 masked prior logits.
        value: [B] float32 the network's value of the root.
    """
    total = jnp.sum(visits, axis=-1)  # [B]
    visited = visits > 0
    probs = jnp.maximum(jnp.finfo(logits.dtype).tiny, jax.nn.softmax(logits, axis=-1))
    visited_probs = jnp.sum(jnp.where(visited, probs, 0.0), axis=-1, keepdims=True)
    weighted_q = jnp.sum(jnp.where(
        visited, probs * qvalues / jnp.where(visited, visited_probs, 1.0), 0.0), axis=-1)
    mixed = (value + total * weighted_q) / (total + 1)  # [B]
    completed = jnp.where(visited, qvalues, mixed[:, None])
    scale = c_visit + jnp.max(visits, axis=-1, keepdims=True)
    return scale * c_scale * completed


@struct.dataclass
class _Root:
    """The root row of a shallow search tree while it is filled in."""

    visits: jax.Array  # [B, A] int32
    qvalues: jax.Array  # [B, A] float32 backed-up mean where visited
    value: jax.Array  # [B] float32 the root's running mean
    # Each child's stored evaluation and the edge to it (where expanded).
    child_logits: jax.Array  # [B, A, A] float32
    child_value: jax.Array  # [B, A] float32
    child_reward: jax.Array  # [B, A] float32
    child_discount: jax.Array  # [B, A] float32


def _take(x: jax.Array, action: jax.Array) -> jax.Array:
    """[B, ...] the entry of each row's ``action`` ([B] int) along axis 1 of ``x``."""
    index = action.reshape((-1, 1) + (1,) * (x.ndim - 2))
    return jnp.take_along_axis(x, index, axis=1)[:, 0]


def make_shallow_gumbel(
    recurrent_fn: mctx.RecurrentFn, mctx_search: MctxSearch, *, num_simulations: int,
    max_num_considered_actions: int, c_visit: float, c_scale: float,
) -> MctxSearch | None:
    """The shallow search, or None where no game's search is one ply deep (V > m).

    Args:
        recurrent_fn: the model step (``search.make_recurrent_fn``).
        mctx_search: ``mctx_search(variables, key, state, logits, value, legal,
            gumbel_scale) -> Searched``, mctx's search with the same settings,
            for the games searched deeper.
        num_simulations: V >= 1.
        max_num_considered_actions: m at most (mctx's).
        c_visit, c_scale: the completed-Q transform's (mctx's ``maxvisit_init``,
            ``value_scale``).

    Returns:
        ``search(variables, key, state [B], logits [B, A], value [B], legal
        [B, A], gumbel_scale) -> Searched`` like ``mctx_search``'s (the same
        root Gumbel noise from the same ``key``), or None.
    """
    considered = min(int(max_num_considered_actions), env.NUM_ACTIONS)
    if not 1 <= num_simulations <= considered:
        return None
    table = jnp.asarray(second_round(num_simulations), jnp.int32)  # [A + 1]
    extra_most = max(second_round(num_simulations))  # E

    def first_round(variables, state, logits, value, legal, gumbel) -> _Root:
        """Each game's min(V, m) best moves by gumbel + logits, in one call of [V * B]."""
        batch, num_actions = logits.shape
        scores = jnp.where(legal, _scores(gumbel, logits, 0.0), -jnp.inf)
        moves = []
        for _ in range(num_simulations):
            move = jnp.argmax(scores, axis=-1).astype(jnp.int32)  # [B]
            moves.append(move)
            scores = jnp.where(jax.nn.one_hot(move, num_actions, dtype=bool), -jnp.inf, scores)
        actions = jnp.stack(moves, axis=1)  # [B, V]
        real = jnp.arange(num_simulations) < jnp.minimum(
            considered, jnp.sum(legal, axis=-1))[:, None]  # [B, V] a move not yet visited

        repeated = jax.tree.map(lambda x: jnp.repeat(x, num_simulations, axis=0), state)
        leaf, _ = recurrent_fn(variables, None, actions.reshape(-1), repeated)  # [V * B]
        unflat = lambda x: x.reshape((batch, num_simulations) + x.shape[1:])  # noqa: E731
        reward, discount = unflat(leaf.reward), unflat(leaf.discount)
        leaf_value, leaf_logits = unflat(leaf.value), unflat(leaf.prior_logits)
        returns = reward + discount * leaf_value  # [B, V]

        root = _Root(
            visits=jnp.zeros((batch, num_actions), jnp.int32),
            qvalues=jnp.zeros((batch, num_actions), jnp.float32), value=value,
            child_logits=jnp.zeros((batch, num_actions, num_actions), jnp.float32),
            child_value=jnp.zeros((batch, num_actions), jnp.float32),
            child_reward=jnp.zeros((batch, num_actions), jnp.float32),
            child_discount=jnp.zeros((batch, num_actions), jnp.float32))
        for k in range(num_simulations):  # mctx's backups, simulation by simulation
            hit = jax.nn.one_hot(actions[:, k], num_actions, dtype=bool) & real[:, k, None]
            put = lambda new, old, h=hit: jnp.where(h, new, old)  # noqa: E731
            root = _Root(
                visits=root.visits + hit,
                qvalues=put(returns[:, k, None], root.qvalues),
                # the root's running mean, from its own evaluation as visit 1
                value=jnp.where(real[:, k], (root.value * (k + 1) + returns[:, k]) / (k + 2.0),
                                root.value),
                child_logits=jnp.where(hit[:, :, None], leaf_logits[:, k, None, :],
                                       root.child_logits),
                child_value=put(leaf_value[:, k, None], root.child_value),
                child_reward=put(reward[:, k, None], root.child_reward),
                child_discount=put(discount[:, k, None], root.child_discount))
        return root

    def revisit(variables, state, logits, legal, gumbel, root: _Root, extra) -> _Root:
        """The second round of G gathered games ([G] rows): ``extra`` [G] revisits each."""
        num_actions = logits.shape[-1]
        first = jnp.sum(root.visits, axis=-1)  # [G] the first round's simulations
        visits, picks = root.visits, []
        for j in range(extra_most):
            real = j < extra  # [G]
            # sigma(q) of the moves visited once; the scale counts the most visits so far.
            sigma_q = (c_visit + (1 if j == 0 else 2)) * c_scale * root.qvalues
            scores = jnp.where(legal & (visits == 1), _scores(gumbel, logits, sigma_q), -jnp.inf)
            move = jnp.argmax(scores, axis=-1).astype(jnp.int32)  # [G]
            visits = visits + (jax.nn.one_hot(move, num_actions, dtype=jnp.int32)
                               * real[:, None])
            picks.append(move)
        moves = jnp.stack(picks, axis=1)  # [G, E]
        # Below a move visited once, every reply's completed Q is the child's value:
        # mctx's interior selection takes the highest prior.
        replies = jnp.argmax(jnp.take_along_axis(
            root.child_logits, moves[:, :, None], axis=1), axis=-1)  # [G, E]
        repeated = jax.tree.map(lambda x: jnp.repeat(x, extra_most, axis=0), state)
        children = env.step(repeated, moves.reshape(-1))
        leaf, _ = recurrent_fn(variables, None, replies.reshape(-1), children)  # [G * E]
        unflat = lambda x: x.reshape(moves.shape)  # noqa: E731
        returns = unflat(leaf.reward) + unflat(leaf.discount) * unflat(leaf.value)  # [G, E]

        qvalues, value = root.qvalues, root.value
        for j in range(extra_most):
            real = j < extra
            move = moves[:, j]
            reward, discount = _take(root.child_reward, move), _take(root.child_discount, move)
            # The child's mean over its two visits, then the root's running mean.
            child_mean = (_take(root.child_value, move) + returns[:, j]) / 2.0
            hit = jax.nn.one_hot(move, num_actions, dtype=bool) & real[:, None]
            qvalues = jnp.where(hit, (reward + discount * child_mean)[:, None], qvalues)
            count = first + 1 + j
            value = jnp.where(real, (value * count + reward + discount * returns[:, j])
                              / (count + 1.0), value)
        return root.replace(visits=visits, qvalues=qvalues, value=value)

    def search(variables, key, state, logits, value, legal, gumbel_scale) -> Searched:
        batch, num_actions = logits.shape
        subset = min(batch, max(1, batch // SUBSET_SHARE))  # G
        # as mctx: rng_key, gumbel_rng = split(rng_key); the first half seeds the
        # games searched deeper (never the Gumbel key again)
        deeper_key, gumbel_key = jax.random.split(key)
        gumbel = gumbel_scale * jax.random.gumbel(gumbel_key, logits.shape, logits.dtype)
        live = ~state.terminated
        extra = table[jnp.minimum(considered, jnp.sum(legal, axis=-1))]  # [B]
        second = live & (extra > 0)  # [B] games with a second round
        deeper = live & (extra < 0)  # [B] games mctx searches
        scale = jnp.broadcast_to(jnp.asarray(gumbel_scale, jnp.float32), (batch, 1))

        def gathered(mask):
            """[G] the first G rows where ``mask`` (the rest padding), and which are real."""
            index = jnp.argsort(~mask, stable=True)[:subset]
            return index, mask[index]

        def put(whole, part, index, mine):
            """``whole`` [B, ...] with rows ``index`` replaced by ``part`` where ``mine``."""
            keep = mine.reshape((-1,) + (1,) * (part.ndim - 1))
            return whole.at[index].set(jnp.where(keep, part, whole[index]))

        def shallow() -> Searched:
            root = first_round(variables, state, logits, value, legal, gumbel)
            if extra_most > 0:
                def with_second_round():
                    index, mine = gathered(second)
                    pick = lambda x: x[index]  # noqa: E731
                    part = revisit(variables, jax.tree.map(pick, state), logits[index],
                                   legal[index], gumbel[index], jax.tree.map(pick, root),
                                   jnp.where(mine, extra[index], 0))
                    return jax.tree.map(lambda w, p: put(w, p, index, mine), root, part)

                root = jax.lax.cond(jnp.any(second), with_second_round, lambda: root)
            sigma_q = completed_qvalues(root.qvalues, root.visits, logits, value,
                                        c_visit=c_visit, c_scale=c_scale)
            survivors = root.visits == jnp.max(root.visits, axis=-1, keepdims=True)
            final = jnp.where(legal & survivors, _scores(gumbel, logits, sigma_q), -jnp.inf)
            # mctx's _mask_invalid_actions before the softmax (search.mask_logits)
            completed = logits + sigma_q
            completed = completed - jnp.max(completed, axis=-1, keepdims=True)
            policy = jax.nn.softmax(jnp.where(legal, completed, jnp.finfo(completed.dtype).min))
            out = Searched(
                action=jnp.argmax(final, axis=-1).astype(jnp.int32), policy=policy,
                root_value=root.value, qvalues=root.qvalues, visit_counts=root.visits,
                child_logits=root.child_logits, child_value=root.child_value,
                child_expanded=root.visits > 0)

            def with_mctx():
                index, mine = gathered(deeper)
                pick = lambda x: x[index]  # noqa: E731
                part = mctx_search(variables, deeper_key,
                                   jax.tree.map(pick, state), logits[index], value[index],
                                   legal[index], scale[index])
                return jax.tree.map(lambda w, p: put(w, p, index, mine), out, part)

            return jax.lax.cond(jnp.any(deeper), with_mctx, lambda: out)

        def everything() -> Searched:
            return mctx_search(variables, key, state, logits, value, legal, gumbel_scale)

        fits = (jnp.sum(second) <= subset) & (jnp.sum(deeper) <= subset)
        return jax.lax.cond(fits, shallow, everything)

    return search
