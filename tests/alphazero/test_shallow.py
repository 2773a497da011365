"""Shallow Gumbel searches with batched leaves are mctx's search, to float rounding.

Each test runs ``search.make_search`` twice on one batch, with the leaves
batched (``shallow``) and with every search left to mctx, from the same key and
the same root evaluation, and compares what they return. Positions are Pons
move strings (columns 1-7, first player first).
"""

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from mctx._src import seq_halving

from c4jax import env
from c4jax.alphazero import network, search, shallow
from c4jax.alphazero.config import NetworkConfig, SearchConfig

NET = NetworkConfig(num_blocks=1, channels=8)
# A drawn game's moves: its prefixes leave 3 legal moves (35-37 stones),
# 2 (38) and 1 (39-41).
#   xxoxoo.
#   oxxoxxx
#   xooxoxo
#   oxxooxo
#   xoxxxox
#   ooxooxo
FILLING = "66616557746246323415254133321113272455477"
# Moves decided by these margins or more must agree (float rounding differs
# between a batch of B and one of V * B positions, and between CPUs).
MARGIN = 1e-3
# An untrained network's values are near 0: a large c_scale lets the Q-values
# decide which moves the second round revisits and which move is played.
C_SCALE = 2.0


def _legal_count(moves):
    return int(np.asarray(env.legal_action_mask(env.from_moves(moves))).sum())


def _wide_positions(seed, count):
    """Move strings of live random games with at least 4 legal moves."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        moves = ""
        for _ in range(int(rng.integers(0, 30))):
            legal = np.asarray(env.legal_action_mask(env.from_moves(moves)))
            after = moves + str(int(rng.choice(np.flatnonzero(legal))) + 1)
            if bool(env.from_moves(after).terminated):
                break
            moves = after
        if _legal_count(moves) >= 4:
            found.append(moves)
    return found


@functools.cache
def _network():
    net = network.make_network(NET)
    return network.make_apply_fn(net), network.init_variables(net, jax.random.key(0))


def _make(num_simulations, batched, apply_fn=None):
    apply_fn = apply_fn or _network()[0]
    config = SearchConfig(num_simulations=num_simulations, c_scale=C_SCALE)
    return jax.jit(search.make_search(apply_fn, config,
                                      batched_leaves=batched), static_argnames="evaluation")


@functools.cache
def _searches(num_simulations):
    """The jitted searches (batched leaves, mctx alone)."""
    return _make(num_simulations, True), _make(num_simulations, False)


def _both(moves, num_simulations, seed, evaluation):
    """Both searches' outputs (numpy) over the positions ``moves``, and [B] bool:
    mctx's final pick beat the runner-up by MARGIN or more."""
    batched, plain = _searches(num_simulations)
    _, variables = _network()
    states = env.stack([env.from_moves(m) for m in moves])
    logits, value = search.make_evaluate(_network()[0])(variables, states)
    key = jax.random.key(seed)
    a, b = (
        jax.tree.map(np.asarray, fn(variables, key, states, evaluation=evaluation,
                                    root_eval=(logits, value)))
        for fn in (batched, plain))
    # mctx's final scores (search_fn splits the key, mctx splits it again for the noise)
    search_key, _ = jax.random.split(key)
    gumbel = 0.0 if evaluation else jax.random.gumbel(jax.random.split(search_key)[1],
                                                      logits.shape)
    config = SearchConfig(c_scale=C_SCALE)
    sigma = shallow.completed_qvalues(
        jnp.where(b.visit_counts > 0, b.qvalues, 0.0), jnp.asarray(b.visit_counts), logits,
        value, c_visit=config.c_visit, c_scale=config.c_scale)
    scores = np.asarray(jnp.maximum(-1e9, gumbel + logits - logits.max(-1, keepdims=True)
                                    + sigma))
    survivors = b.visit_counts == b.visit_counts.max(axis=-1, keepdims=True)
    top = np.sort(np.where(survivors & (b.visit_counts > 0), scores, -np.inf), axis=-1)
    with np.errstate(invalid="ignore"):  # -inf - -inf in a finished game's row
        return a, b, (top[:, -1] - top[:, -2]) > MARGIN


def _assert_same(a, b, live):
    """The batched search's output ``a`` equals mctx's ``b`` on the ``live`` rows."""
    np.testing.assert_array_equal(a.visit_counts[live], b.visit_counts[live])
    np.testing.assert_array_equal(a.child_expanded, b.child_expanded)
    for field in ("policy", "root_value", "policy_value", "prior_logits"):
        np.testing.assert_allclose(getattr(a, field)[live], getattr(b, field)[live],
                                   rtol=1e-5, atol=1e-5, err_msg=field)
    visited = b.visit_counts > 0
    np.testing.assert_allclose(a.qvalues[visited], b.qvalues[visited], rtol=1e-5, atol=1e-5)
    expanded = b.child_expanded
    np.testing.assert_allclose(a.child_value[expanded], b.child_value[expanded], atol=1e-5)
    np.testing.assert_allclose(a.child_logits[expanded], b.child_logits[expanded], atol=1e-4)


def test_considered_visits_are_mctxs():
    for considered in range(0, 17):
        for sims in range(1, 25):
            assert shallow.considered_visits(considered, sims) == \
                seq_halving.get_sequence_of_considered_visits(considered, sims)


def test_second_round_table():
    # 4 simulations: 3 legal moves take one revisit, 2 take two, 1 goes deeper.
    assert shallow.second_round(4) == (-1, -1, 2, 1, 0, 0, 0, 0)
    assert shallow.second_round(2) == (-1, 1, 0, 0, 0, 0, 0, 0)  # one move: visited twice
    # 7: with 5 moves the halving keeps 2 for a second visit, with 6 it keeps 3 for 1
    assert shallow.second_round(7) == (-1, -1, -1, -1, -1, 2, 1, 0)


def test_no_shallow_search_where_simulations_exceed_the_considered_moves():
    make = functools.partial(shallow.make_shallow_gumbel, None, None, c_visit=50.0, c_scale=0.1)
    assert make(num_simulations=5, max_num_considered_actions=4) is None
    assert make(num_simulations=0, max_num_considered_actions=7) is None
    assert make(num_simulations=4, max_num_considered_actions=4) is not None


@pytest.mark.parametrize("num_simulations", [2, 4])
@pytest.mark.parametrize("evaluation", [False, True])
def test_equals_mctx_with_second_rounds_and_deeper_games(num_simulations, evaluation):
    # 64 games: 4 with a second round (3 and 2 legal moves), 2 with one legal
    # move (mctx searches them apart), one finished, the rest with >= 4 moves.
    moves = ([FILLING[:n] for n in (35, 36, 37, 38, 39, 41)] + ["4444441717171"]
             + ["", "4", "44"] + _wide_positions(0, 54))
    assert [_legal_count(m) for m in moves[:7]] == [3, 3, 3, 2, 1, 1, 0]
    live = np.arange(len(moves)) != 6
    for seed in (0, 1):
        a, b, decided = _both(moves, num_simulations, seed, evaluation)
        _assert_same(a, b, live)
        decided &= live
        assert decided.mean() > 0.8
        np.testing.assert_array_equal(a.action[decided], b.action[decided])
        # with one legal move the search has no choice
        assert (a.action[4:6] == 6).all() and (a.policy[4:6, 6] == 1).all()
    if num_simulations == 4:  # the second round's revisits happened
        assert (a.visit_counts[:3].max(axis=-1) == 2).all()
        assert sorted(a.visit_counts[3]) == [0, 0, 0, 0, 0, 2, 2]


def test_too_many_second_round_games_go_to_mctx_whole():
    # 16 games hand one at most to the second round: with two, mctx searches all,
    # from the same key: the same result.
    moves = [FILLING[:35], FILLING[:36]] + _wide_positions(1, 14)
    a, b, decided = _both(moves, 4, 3, False)
    _assert_same(a, b, np.ones(len(moves), bool))
    assert decided.mean() > 0.8
    np.testing.assert_array_equal(a.action[decided], b.action[decided])


def test_leaves_go_to_the_network_in_one_call():
    apply_fn, variables = _network()
    states = env.stack([env.from_moves(m) for m in _wide_positions(2, 32)])
    sizes = {True: [], False: []}
    for batched in (True, False):
        def recording(variables, obs, batched=batched):
            sizes[batched].append(obs.shape[0])  # at trace time: one entry a call site
            return apply_fn(variables, obs)

        _make(4, batched, recording)(variables, jax.random.key(0), states)
    # B = 32, G = 2: V * B first-round leaves, G * E second-round leaves, and
    # mctx's root and leaf calls over G games or all B.
    assert sorted(set(sizes[True])) == [2, 4, 32, 4 * 32]
    assert sorted(set(sizes[False])) == [32]


@pytest.mark.parametrize("partitionable", [True, False])  # the command lines' mode, this suite's
def test_games_searched_deeper_get_a_key_of_their_own(partitionable):
    # The games mctx searches apart (one legal move at 4 simulations) draw from a
    # key split off the search's key, never from the root's Gumbel key again (with
    # the partitionable threefry, fold_in(key, 1) is split(key)[1]).
    apply_fn, variables = _network()
    recurrent_fn = search.make_recurrent_fn(apply_fn)
    shapes = []

    def spy(variables, key, state, logits, value, legal, gumbel_scale):
        out = search._from_tree(mctx.gumbel_muzero_policy(
            params=variables, rng_key=key, root=mctx.RootFnOutput(
                prior_logits=logits, value=value, embedding=state),
            recurrent_fn=recurrent_fn, num_simulations=4, invalid_actions=~legal,
            gumbel_scale=gumbel_scale))
        shapes.append(value.shape)  # at trace time: [G] for the deeper games, [B] for all
        return out.replace(root_value=jax.random.uniform(key, value.shape))  # the key's mark

    fn = shallow.make_shallow_gumbel(recurrent_fn, spy, num_simulations=4,
                                     max_num_considered_actions=7, c_visit=50.0, c_scale=0.1)
    moves = [FILLING[:39]] + _wide_positions(3, 31)
    states = env.stack([env.from_moves(m) for m in moves])
    legal = env.legal_action_mask(states)
    logits, value = search.make_evaluate(apply_fn)(variables, states)
    with jax.threefry_partitionable(partitionable):
        key = jax.random.key(5)
        out = jax.jit(fn)(variables, key, states, search.mask_logits(logits, legal),
                          value.astype(jnp.float32), legal, 1.0)
        _, gumbel_key = jax.random.split(key)
        marks = {name: float(jax.random.uniform(k, (2,))[0])
                 for name, k in (("the search's key", key), ("the Gumbel key", gumbel_key))}
    assert sorted(shapes) == [(2,), (32,)]  # G = B / 16
    assert float(out.action[0]) == 6  # the one legal move, from the deeper search
    for name, mark in marks.items():
        assert float(out.root_value[0]) != mark, name
