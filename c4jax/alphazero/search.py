"""Batched tree search over the exact Connect Four model with mctx.

Shape glossary: B batch of games, A = 7 actions, N search nodes.

The environment itself is the model: a node's embedding is an ``env.State``,
and ``recurrent_fn`` steps it and evaluates the network on the new position.
Values follow the two-player convention of pgx's AlphaZero example: every value
is from the side of the player to move at that node, a step's ``reward`` is the
result for the player who just moved, and ``discount = -1`` flips the sign
between plies (``0`` at and after the end of a game, where the value is 0).

Q-values are normalised with the known value range [-1, 1] rather than with
mctx's default per-node min-max, which stretches tiny differences between the
values of an untrained network to the full range, so that searches of 100+
simulations may miss a one-move win or the only block. PUCT counts an
unvisited child as a draw (AlphaGo Zero's ``Q = 0``) rather than as a loss,
so that every reply gets tried early; Gumbel completes Q-values with mctx's
mixed value, without rescaling.

A Gumbel search of a ply or two (no more simulations than moves it considers,
as in the presets' 4 simulations over 7 moves) knows its leaves before it
evaluates any: ``shallow`` evaluates them in one network call instead of
mctx's one per simulation, the same search to float rounding.

mctx masks illegal moves only at the root (``invalid_actions``); below it,
``recurrent_fn`` gives illegal moves a large negative finite prior logit. Should
a search still try a full column there, the env scores it as a loss for the
mover (reward -1), so it is never preferred.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from c4jax import env
from c4jax.alphazero import shallow
from c4jax.alphazero.config import SearchConfig
from c4jax.alphazero.network import ApplyFn


@struct.dataclass
class SearchOutput:
    """The result of one search over a batch of positions.

    ``root_value`` is mctx's root node value: the mean of the values backed up
    by all simulations (network value alone without simulations). Gumbel's
    sequential halving spends simulations on worse moves too, so it is an
    underestimate in won positions (e.g. ~0.3 with a win in one), but its sign
    is right once the search sees the result.

    ``policy_value`` is the expected value of playing ``policy``, with each
    move's Q from the search (its backed-up mean where visited, else
    ``root_value``); it does not carry Gumbel's underestimate and is the
    search's value target for the position (``train.value_target_q``).

    For a finished game (all moves illegal) ``action`` is 0, ``policy`` is all
    zeros and ``root_value`` and ``policy_value`` are the exact result for the
    side to move (-1 after a loss, 0 after a draw).
    """

    action: jax.Array  # [B] int32 move chosen, always legal for live games
    policy: jax.Array  # [B, A] float32 improved policy: the training target
    root_value: jax.Array  # [B] float32 search value for the player to move
    policy_value: jax.Array  # [B] float32 value of ``policy``: sum_a policy[a] * Q[a]
    # [B, A] float32 each move's Q for the player to move: its backed-up mean
    # where visited, else ``root_value`` (the Q used by ``policy_value``).
    qvalues: jax.Array | None = None
    visit_counts: jax.Array | None = None  # [B, A] int32 root visits per move (0 without search)
    # The network's evaluation of the position after each root move, as the search
    # made it when it expanded that child (``evaluate`` of the child position), so
    # that the next move's root need not run the network again (``selfplay``).
    child_logits: jax.Array | None = None  # [B, A, A] float32 masked prior logits
    child_value: jax.Array | None = None  # [B, A] float32 value for the child's mover
    child_expanded: jax.Array | None = None  # [B, A] bool, the search expanded that child
    # The root's masked prior logits (the network's policy before the search), from
    # which ``selfplay`` measures how much the search changed it (policy surprise).
    prior_logits: jax.Array | None = None  # [B, A] float32, -inf-like where illegal


RootEval = tuple[jax.Array, jax.Array]  # (logits [B, A] float32 masked, value [B] float32)


SearchFn = Callable[..., SearchOutput]


def puct_qtransform(tree: mctx.Tree, node_index: jax.Array) -> jax.Array:
    """[A] Q-values of one node's children mapped from [-1, 1] to [0, 1].

    An unvisited child counts as a draw (0.5). mctx's ``QTransform`` signature:
    ``tree`` is unbatched, ``node_index`` a scalar.
    """
    qvalues = jnp.where(tree.children_visits[node_index] > 0, tree.qvalues(node_index), 0.0)
    return (qvalues + 1.0) / 2.0


# Values live in [-1, 1]: no per-node rescaling (see the module doc).
gumbel_qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, rescale_values=False)


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Gives illegal moves a large negative finite logit (as mctx does at the root).

    Args:
        logits: [B, A] float32 prior logits.
        legal: [B, A] bool legal moves; a row may be all False (finished game).

    Returns:
        [B, A] float32 logits less their maximum over all moves (legal or
        not, so the best legal one may be below 0; a softmax is unchanged),
        with ``finfo.min`` on illegal moves. A softmax of them is exactly 0
        on illegal moves of a live game, and never NaN.
    """
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def terminal_value(state: env.State) -> jax.Array:
    """[B] float32 exact value of finished games for ``state.current_player`` (0 if live).

    -1 after the other player's win (or a forfeit by ``current_player``, which
    does not advance the turn), 0 after a draw.
    """
    return jnp.where(state.terminated, env.result_value(state.winner, state.current_player), 0.0)


def make_recurrent_fn(apply_fn: ApplyFn) -> mctx.RecurrentFn:
    """The mctx model step: play ``action`` in the env and evaluate the network.

    Args:
        apply_fn: inference network, ``(variables, obs [B, H, W, 2]) ->
            (logits [B, A], value [B])``.

    Returns:
        ``recurrent_fn(variables, rng_key, action [B], state [B]) ->
        (mctx.RecurrentFnOutput, next_state [B])``.
    """

    def recurrent_fn(
        variables: Any, rng_key: jax.Array, action: jax.Array, state: env.State
    ) -> tuple[mctx.RecurrentFnOutput, env.State]:
        del rng_key  # the model is exact and deterministic
        next_state = env.step(state, action)
        logits, value = apply_fn(variables, env.observe(next_state))
        ended_now = ~state.terminated & next_state.terminated
        # The result for the player who just moved: +1 win, 0 draw, -1 forfeit.
        result = env.result_value(next_state.winner, state.current_player)
        reward = jnp.where(ended_now, result, 0.0)
        output = mctx.RecurrentFnOutput(
            reward=reward.astype(jnp.float32),
            discount=jnp.where(next_state.terminated, 0.0, -1.0).astype(jnp.float32),
            prior_logits=mask_logits(logits, env.legal_action_mask(next_state)),
            value=jnp.where(next_state.terminated, 0.0, value).astype(jnp.float32),
        )
        return output, next_state

    return recurrent_fn


def _masked_argmax(scores: jax.Array, legal: jax.Array) -> jax.Array:
    """[B] int32 best legal move (0 if none) of [B, A] ``scores``."""
    return jnp.argmax(jnp.where(legal, scores, -jnp.inf), axis=-1).astype(jnp.int32)


def _sample(key: jax.Array, policy: jax.Array, legal: jax.Array) -> jax.Array:
    """[B] int32 move sampled from [B, A] probabilities, restricted to legal moves.

    Falls back to the first legal move if no legal move has positive weight
    (and to 0 in finished games).
    """
    usable = legal & (policy > 0)
    logits = jnp.where(usable, jnp.log(jnp.where(usable, policy, 1.0)), -jnp.inf)
    sampled = jax.random.categorical(key, logits, axis=-1)
    fallback = _masked_argmax(jnp.zeros_like(policy), legal)
    return jnp.where(jnp.any(usable, axis=-1), sampled, fallback).astype(jnp.int32)


def make_evaluate(apply_fn: ApplyFn) -> Callable[[Any, env.State], RootEval]:
    """``evaluate(variables, state[B]) -> (logits [B, A], value [B])``: the network at a root.

    The logits are masked to the legal moves (``mask_logits``), exactly as
    ``recurrent_fn`` masks a child's: a root evaluated here and the same position
    evaluated as a child in the previous search agree to float rounding.
    """

    def evaluate(variables: Any, state: env.State) -> RootEval:
        logits, value = apply_fn(variables, env.observe(state))
        return mask_logits(logits, env.legal_action_mask(state)), value.astype(jnp.float32)

    return evaluate


def _children(tree: mctx.Tree) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The stored evaluations of the root's children: logits [B, A, A], value [B, A],
    expanded [B, A] (where False, the other two are meaningless)."""
    child = tree.children_index[:, mctx.Tree.ROOT_INDEX]  # [B, A], UNVISITED = -1
    expanded = child != mctx.Tree.UNVISITED
    node = jnp.maximum(child, 0)
    logits = jnp.take_along_axis(tree.children_prior_logits, node[:, :, None], axis=1)
    value = jnp.take_along_axis(tree.raw_values, node, axis=1)
    return logits, value, expanded


def _from_tree(out: mctx.PolicyOutput) -> shallow.Searched:
    """The root of an mctx search's tree, as the shallow search reports its own."""
    summary = out.search_tree.summary()
    logits, value, expanded = _children(out.search_tree)
    return shallow.Searched(
        action=out.action.astype(jnp.int32), policy=out.action_weights,
        root_value=summary.value, qvalues=summary.qvalues,
        visit_counts=summary.visit_counts.astype(jnp.int32),
        child_logits=logits, child_value=value, child_expanded=expanded)


def _gumbel_scale(config: SearchConfig, state: env.State) -> float | jax.Array:
    """Self-play's root Gumbel noise scale: a float, or [B, 1] float32 that is 0
    from ``config.gumbel_noise_moves`` stones on (a game's best move from then on)."""
    if config.gumbel_noise_moves >= env.NUM_CELLS:
        return float(config.gumbel_scale)
    noisy = state.num_moves < config.gumbel_noise_moves  # [B]
    return jnp.where(noisy, jnp.float32(config.gumbel_scale), 0.0)[:, None]


def make_search(apply_fn: ApplyFn, config: SearchConfig, *, batched_leaves: bool = True
                ) -> SearchFn:
    """Builds the search for self-play and evaluation.

    Args:
        apply_fn: inference network, ``(variables, obs [B, H, W, 2]) ->
            (logits [B, A] float32, value [B] float32)`` (``network.make_apply_fn``).
        config: the search hyperparameters; ``algorithm`` picks Gumbel MuZero
            (``gumbel``) or PUCT with root Dirichlet noise (``puct``).
        batched_leaves: Gumbel searches of a ply or two evaluate their leaves
            in one network call (``shallow``); False leaves every search to
            mctx (the same search, slower: for benchmarks and tests).

    Returns:
        ``search_fn(variables, key, state, evaluation=False, root_eval=None) ->
        SearchOutput`` for a state of batch shape ``[B]``. ``evaluation`` is a
        Python bool (static under jit): it turns off the root noise and picks
        the best move deterministically. ``root_eval``: the network's
        evaluation of ``state`` (``make_evaluate``) if the caller has it, else
        the search runs the network at the root. ``key`` is consumed. The
        function is pure and traceable; jit it (with
        ``static_argnames='evaluation'``) or call it inside a jitted program.
    """
    if config.algorithm not in ("gumbel", "puct"):
        raise ValueError(f"search.algorithm: got {config.algorithm!r}, allowed: gumbel, puct")
    if config.num_simulations < 0:
        raise ValueError(f"search.num_simulations: got {config.num_simulations!r}, allowed: >= 0")
    recurrent_fn = make_recurrent_fn(apply_fn)
    evaluate = make_evaluate(apply_fn)
    num_simulations = int(config.num_simulations)
    qtransform = functools.partial(
        gumbel_qtransform, maxvisit_init=float(config.c_visit), value_scale=float(config.c_scale))

    def gumbel_search(variables, key, state, logits, value, legal, gumbel_scale
                      ) -> shallow.Searched:
        """mctx's Gumbel MuZero over [B] roots."""
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
        return _from_tree(mctx.gumbel_muzero_policy(
            params=variables, rng_key=key, root=root, recurrent_fn=recurrent_fn,
            num_simulations=num_simulations, invalid_actions=~legal, qtransform=qtransform,
            max_num_considered_actions=int(config.max_num_considered_actions),
            gumbel_scale=gumbel_scale))

    shallow_search = None
    if batched_leaves and config.algorithm == "gumbel":
        shallow_search = shallow.make_shallow_gumbel(
            recurrent_fn, gumbel_search, num_simulations=num_simulations,
            max_num_considered_actions=int(config.max_num_considered_actions),
            c_visit=float(config.c_visit), c_scale=float(config.c_scale))

    def search_fn(
        variables: Any,
        key: jax.Array,
        state: env.State,
        evaluation: bool = False,
        root_eval: RootEval | None = None,
    ) -> SearchOutput:
        """Searches every position of ``state`` ([B]) and picks a move for each."""
        search_key, action_key = jax.random.split(key)
        legal = env.legal_action_mask(state)  # [B, A]
        logits, value = evaluate(variables, state) if root_eval is None else root_eval
        logits = mask_logits(logits, legal)  # on evaluate's logits: a shift, same softmax
        value = value.astype(jnp.float32)
        num_actions = legal.shape[-1]
        children = (
            jnp.zeros(legal.shape + (num_actions,), jnp.float32),
            jnp.zeros(legal.shape, jnp.float32),
            jnp.zeros(legal.shape, bool),
        )

        if num_simulations == 0:
            policy = jax.nn.softmax(logits, axis=-1)
            policy_value = value
            qvalues = jnp.broadcast_to(value[:, None], logits.shape)
            visit_counts = jnp.zeros(logits.shape, jnp.int32)
            if evaluation:
                action = _masked_argmax(logits, legal)
            else:
                action = _sample(action_key, policy, legal)
            root_value = value
        else:
            if config.algorithm == "gumbel":
                searched = (shallow_search or gumbel_search)(
                    variables, search_key, state, logits, value, legal,
                    0.0 if evaluation else _gumbel_scale(config, state))
                policy = searched.policy
                action = searched.action
                if evaluation and config.evaluation_move == "policy":
                    action = _masked_argmax(policy, legal)
            else:  # puct
                root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
                out = mctx.muzero_policy(
                    params=variables,
                    rng_key=search_key,
                    root=root,
                    recurrent_fn=recurrent_fn,
                    num_simulations=num_simulations,
                    invalid_actions=~legal,
                    qtransform=puct_qtransform,
                    dirichlet_fraction=0.0 if evaluation else float(config.dirichlet_fraction),
                    dirichlet_alpha=float(config.dirichlet_alpha),
                    pb_c_init=float(config.pb_c_init),
                )
                policy = out.action_weights  # visit distribution
                best = _masked_argmax(policy, legal)
                if evaluation:
                    action = best
                else:
                    explore = state.num_moves < config.temperature_moves
                    action = jnp.where(explore, _sample(action_key, policy, legal), best)
                searched = _from_tree(out)
            children = (searched.child_logits, searched.child_value, searched.child_expanded)
            root_value = searched.root_value
            visited = searched.visit_counts > 0
            qvalues = jnp.where(visited, searched.qvalues, root_value[:, None])
            visit_counts = searched.visit_counts
            weights = jnp.where(legal, policy, 0.0)
            weights = weights / jnp.maximum(jnp.sum(weights, axis=-1, keepdims=True), 1e-9)
            policy_value = jnp.sum(weights * qvalues, axis=-1)
            if evaluation and config.algorithm == "gumbel" and config.evaluation_move == "q":
                # Ties (e.g. several proven wins) go to the improved policy.
                action = _masked_argmax(qvalues + 1e-3 * policy, legal)

        live = ~state.terminated
        policy = jnp.where(live[:, None] & legal, policy, 0.0).astype(jnp.float32)
        return SearchOutput(
            action=jnp.where(live, action, 0).astype(jnp.int32),
            policy=policy,
            root_value=jnp.where(live, root_value, terminal_value(state)).astype(jnp.float32),
            policy_value=jnp.where(live, policy_value, terminal_value(state)).astype(jnp.float32),
            # A finished root: every move's Q is its (exact) root_value, as documented.
            qvalues=jnp.where(
                live[:, None], qvalues, terminal_value(state)[:, None]
            ).astype(jnp.float32),
            visit_counts=jnp.where(live[:, None], visit_counts, 0).astype(jnp.int32),
            child_logits=children[0].astype(jnp.float32),
            child_value=children[1].astype(jnp.float32),
            child_expanded=children[2] & live[:, None],
            prior_logits=logits.astype(jnp.float32),
        )

    return search_fn


def make_opening_search(search_fn: SearchFn, opening_search_fn: SearchFn, *,
                        games: int) -> SearchFn:
    """A search that gives the K games nearest their start a larger search.

    Each call searches the ``games`` = K positions of the batch with the fewest
    stones on the board with ``opening_search_fn`` (ties to the lower index)
    and the other B - K with ``search_fn``, and returns one ``SearchOutput`` in
    the batch's order. Self-play uses it to spend more simulations where the
    network judges worst, the opening (``train.opening_search_games``).

    Args:
        search_fn: the search of the other positions (``make_search``).
        opening_search_fn: the larger search, with the same output fields.
        games: K >= 1; with K >= B every position gets the larger search.

    Returns:
        ``search_fn(variables, key, state [B], evaluation=False, root_eval=None)``
        like ``make_search``'s. ``key`` is split between the two searches. On
        several devices the K positions are gathered from the whole batch.
    """
    if games < 1:
        raise ValueError(f"games: >= 1, got {games!r}")

    def split_search(variables, key, state, evaluation=False, root_eval=None):
        batch = state.num_moves.shape[0]
        if games >= batch:
            return opening_search_fn(variables, key, state, evaluation=evaluation,
                                     root_eval=root_eval)
        order = jnp.argsort(state.num_moves, stable=True)  # [B] fewest stones first
        parts = (order[:games], order[games:])  # [K], [B - K]
        keys = jax.random.split(key)
        outs = [
            fn(variables, part_key, jax.tree.map(lambda x, i=index: x[i], state),
               evaluation=evaluation,
               root_eval=(None if root_eval is None
                          else jax.tree.map(lambda x, i=index: x[i], root_eval)))
            for fn, part_key, index in zip((opening_search_fn, search_fn), keys, parts, strict=True)
        ]
        inverse = jnp.argsort(order)  # [B] where each position's row went
        return jax.tree.map(lambda a, b: jnp.concatenate([a, b])[inverse], *outs)

    return split_search


@functools.lru_cache(maxsize=64)
def make_alphazero_act(
    apply_fn: ApplyFn, search_config: SearchConfig, *, num_simulations: int
) -> Callable[[dict, jax.Array, env.State], jax.Array]:
    """``act(variables, key, state[B]) -> [B] int32``: the search's best move, no noise.

    With ``num_simulations == 0`` it is the network alone (its highest-prior
    legal move). Bind the variables with ``functools.partial(act, variables)``
    to get an agent whose arrays the arena passes as jit arguments, so a new
    checkpoint of the same network reuses the compiled match. Equal arguments
    give the same function (cached): with ``network.make_apply_fn``'s own cache,
    every agent of one network shape and search in a process shares its traces
    and compiled matches (the checkpoints of a round robin, the evaluations of
    consecutive runs).

    Args:
        apply_fn: ``(variables, obs [B, H, W, 2]) -> (logits [B, A], value [B])``.
        search_config: the run's search settings.
        num_simulations: simulations per move (replaces the config's), >= 0.
    """
    config = dataclasses.replace(search_config, num_simulations=num_simulations)
    search_fn = make_search(apply_fn, config)

    def act(variables, key, state):
        return search_fn(variables, key, state, evaluation=True).action

    return act
