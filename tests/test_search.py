"""Behaviour of the mctx search with an untrained (randomly initialised) network.

The env is an exact model, so with enough simulations the search must see
one-move wins and losses whatever the network says. Positions are Pons move
strings (columns 1-7, first player first); boards are drawn top row first, ``x``
the first player, ``o`` the second. Actions are 0-based columns.

Compilation dominates the run time on CPU, so every (algorithm, mode) pair runs
one jitted search over one batch holding all the positions, and the tests read
that cached result.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import env, network, search
from c4jax.config import NetworkConfig, SearchConfig

# Gumbel's sequential halving gives each of 7 root moves about sims / 21 visits
# in its first round, and with a flat prior a reply needs 8 visits to try all
# seven answers: 200 simulations see every one-move threat (128 miss some).
NUM_SIMULATIONS = 200
NET = NetworkConfig(num_blocks=2, channels=16, kernel_size=3)

# Mover can win now, and must take the win rather than block o's threat.
#   ...o...
#   ...x...
#   ...o...
#   x..x..o
#   x..o..o
#   x..x..o    x to move: column 1 (action 0) wins; column 4 is full.
TAKE_WIN = "444444171717"
# Three columns full; x completes the bottom row in column 4.
#   ooo....
#   xxx....
#   ooo....
#   xxx....
#   ooo....
#   xxx....    x to move: column 4 (action 3) wins; columns 1-3 are full.
WIN_FULL_COLUMNS = "111111222222333333"
# o must block x's vertical threat.
#   ...o...
#   ...x...
#   ...o...
#   x..x...
#   x..o..o
#   x..x..o    o to move: column 1 (action 0) blocks; column 4 is full.
BLOCK_VERTICAL = "44444417171"
# o must block x's horizontal threat.
#   .......
#   ...
#   ..o....
#   oxxx...    o to move: column 5 (action 4) blocks.
BLOCK_HORIZONTAL = "21334"
# x threatens both ends of the bottom row: o cannot stop the loss.
#   ..oo...
#   ..xxx..    o to move: x wins next in column 2 or 6 (actions 1, 5).
LOST_O = "33445"
# The same with colours swapped: x to move cannot stop o.
#   ..xx...
#   x.ooo..    x to move: o wins next in column 2 or 6.
LOST_X = "133445"
# A finished game: x just won in column 1.
FINISHED = "4444441717171"
# One empty cell left, and filling it wins for nobody.
#   xxoxoo.
#   oxxoxxx
#   xooxoxo
#   oxxooxo
#   xoxxxox
#   ooxooxo    o to move: column 7 (action 6) draws.
LAST_CELL = "66616557746246323415254133321113272455477"

TACTICS = {
    # name: (moves, the only good actions, sign of the root value)
    "take_win": (TAKE_WIN, {0}, +1),
    "win_full_columns": (WIN_FULL_COLUMNS, {3}, +1),
    "block_vertical": (BLOCK_VERTICAL, {0}, 0),
    "block_horizontal": (BLOCK_HORIZONTAL, {4}, 0),
    "lost_o": (LOST_O, None, -1),
    "lost_x": (LOST_X, None, -1),
}
NAMES = list(TACTICS)
NUM_RANDOM = 24
MODES = [
    pytest.param(alg, ev, id=f"{alg}-{'eval' if ev else 'selfplay'}")
    for alg in ("gumbel", "puct")
    for ev in (False, True)
]


def _random_positions(seed, count):
    """Move strings of live random games, biased to fill columns early."""
    rng = np.random.default_rng(seed)
    positions = []
    while len(positions) < count:
        weights = rng.dirichlet(np.full(7, 0.5))
        length = int(rng.integers(8, 40))
        heights = [0] * 7
        moves = ""
        while len(moves) < length:
            open_cols = [c for c in range(7) if heights[c] < 6]
            w = weights[open_cols] / weights[open_cols].sum()
            col = int(rng.choice(open_cols, p=w))
            heights[col] += 1
            moves += str(col + 1)
            if bool(env.from_moves(moves).terminated):
                break
        if not bool(env.from_moves(moves).terminated):
            positions.append(moves)
    return positions


RANDOM = _random_positions(0, NUM_RANDOM)
ALL_MOVES = [TACTICS[n][0] for n in NAMES] + [FINISHED] + RANDOM
FINISHED_INDEX = len(NAMES)


@functools.cache
def _network(seed=0):
    """(apply_fn, variables) of an untrained network."""
    net = network.make_network(NET)
    return network.make_apply_fn(net), network.init_variables(net, jax.random.key(seed))


@functools.cache
def _states():
    return env.stack([env.from_moves(m) for m in ALL_MOVES])


@functools.cache
def _search_fn(config):
    apply_fn, _ = _network()
    return jax.jit(search.make_search(apply_fn, config), static_argnames="evaluation")


@functools.cache
def _result(algorithm, evaluation, num_simulations=NUM_SIMULATIONS, seed=1, net_seed=0):
    """SearchOutput over ALL_MOVES, as numpy arrays."""
    # temperature_moves=0: PUCT self-play plays its best move here (tested apart).
    config = SearchConfig(algorithm=algorithm, num_simulations=num_simulations, temperature_moves=0)
    _, variables = _network(net_seed)
    out = _search_fn(config)(variables, jax.random.key(seed), _states(), evaluation=evaluation)
    return jax.tree.map(np.asarray, out)


def test_positions_are_as_documented():
    for name, (moves, good, _) in TACTICS.items():
        state = env.from_moves(moves)
        assert not bool(state.terminated), name
        if good is not None:
            for action in good:
                mover = int(state.current_player)
                after = env.step(state, jnp.int32(action))
                won = int(after.winner) == mover
                assert won == (TACTICS[name][2] > 0), name
    assert bool(env.from_moves(FINISHED).terminated)
    legal = np.asarray(env.legal_action_mask(_states()))
    assert not legal[:FINISHED_INDEX].all(axis=1).all()  # some full columns
    assert (~legal[FINISHED_INDEX + 1 :]).any()


@pytest.mark.parametrize("algorithm, evaluation", MODES)
def test_output_shapes_and_dtypes(algorithm, evaluation):
    out = _result(algorithm, evaluation)
    b = len(ALL_MOVES)
    assert out.action.shape == (b,) and out.action.dtype == np.int32
    assert out.policy.shape == (b, 7) and out.policy.dtype == np.float32
    assert out.root_value.shape == (b,) and out.root_value.dtype == np.float32


@pytest.mark.parametrize("algorithm, evaluation", MODES)
def test_legal_moves_and_policy(algorithm, evaluation):
    out = _result(algorithm, evaluation)
    legal = np.asarray(env.legal_action_mask(_states()))
    live = legal.any(axis=1)
    assert live.sum() == len(ALL_MOVES) - 1
    assert np.all(legal[live, out.action[live]])
    assert np.all(out.policy[~legal] == 0)
    np.testing.assert_allclose(out.policy[live].sum(axis=1), 1.0, atol=1e-5)
    assert np.all(out.policy >= 0)
    assert np.all(np.abs(out.root_value) <= 1.0 + 1e-5)
    # The finished game: no move, no policy, the exact result (x just won).
    assert out.action[FINISHED_INDEX] == 0
    assert np.all(out.policy[FINISHED_INDEX] == 0)
    assert out.root_value[FINISHED_INDEX] == -1.0


@pytest.mark.parametrize("algorithm, evaluation", MODES)
@pytest.mark.parametrize("name", ["take_win", "win_full_columns"])
def test_takes_a_win_in_one(algorithm, evaluation, name):
    out = _result(algorithm, evaluation)
    i = NAMES.index(name)
    assert out.action[i] in TACTICS[name][1]
    assert out.root_value[i] > 0
    assert out.policy[i].argmax() in TACTICS[name][1]


@pytest.mark.parametrize("algorithm, evaluation", MODES)
@pytest.mark.parametrize("name", ["block_vertical", "block_horizontal"])
def test_blocks_a_win_in_one(algorithm, evaluation, name):
    out = _result(algorithm, evaluation)
    i = NAMES.index(name)
    assert out.action[i] in TACTICS[name][1]
    assert out.policy[i].argmax() in TACTICS[name][1]


@pytest.mark.parametrize("algorithm, evaluation", MODES)
@pytest.mark.parametrize("name", ["lost_o", "lost_x"])
def test_root_value_negative_when_the_loss_cannot_be_stopped(algorithm, evaluation, name):
    out = _result(algorithm, evaluation)
    assert out.root_value[NAMES.index(name)] < 0


@pytest.mark.parametrize("evaluation", [False, True])
def test_network_alone(evaluation):
    out = _result("gumbel", evaluation, num_simulations=0)
    apply_fn, variables = _network()
    states = _states()
    logits, value = apply_fn(variables, env.observe(states))
    legal = np.asarray(env.legal_action_mask(states))
    live = legal.any(axis=1)
    masked = np.where(legal, np.asarray(logits), -np.inf)[live]
    expected = np.exp(masked - masked.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out.policy[live], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.root_value[live], np.asarray(value)[live], rtol=1e-6)
    assert np.all(legal[live, out.action[live]])
    assert np.all(out.policy[~legal] == 0)
    if evaluation:
        np.testing.assert_array_equal(out.action[live], masked.argmax(axis=1))


def test_evaluation_is_deterministic_and_self_play_is_not():
    for algorithm in ("gumbel", "puct"):
        a = _result(algorithm, True)
        b = _result(algorithm, True, seed=2)
        np.testing.assert_array_equal(a.action, b.action)
        np.testing.assert_allclose(a.policy, b.policy, atol=1e-6)
        c = _result(algorithm, False)
        d = _result(algorithm, False, seed=2)
        assert not np.allclose(c.policy, d.policy, atol=1e-3)


def test_puct_samples_early_moves_in_self_play():
    apply_fn, variables = _network()
    config = SearchConfig(algorithm="puct", num_simulations=8, temperature_moves=10)
    search_fn = jax.jit(search.make_search(apply_fn, config), static_argnames="evaluation")

    def play(moves, seed):  # a batch of one game: any batch size works
        state = env.stack([env.from_moves(moves)])
        out = jax.tree.map(np.asarray, search_fn(variables, jax.random.key(seed), state))
        assert out.action.shape == (1,) and out.policy.shape == (1, 7)
        assert np.asarray(env.legal_action_mask(state))[0, out.action[0]]
        return out.action[0], out.policy[0]

    # The empty board (0 moves < 10): sampled from the visit distribution.
    early = [play("", seed) for seed in range(12)]
    assert all(policy[action] > 0 for action, policy in early)
    assert len({int(action) for action, _ in early}) > 1
    # A 12-move position: the most visited move.
    for seed in range(3):
        action, policy = play(TAKE_WIN, seed)
        assert action == policy.argmax()


def test_recurrent_fn_conventions():
    apply_fn, variables = _network()
    recurrent_fn = search.make_recurrent_fn(apply_fn)
    cases = [
        # (moves, action, reward, discount)
        (TAKE_WIN, 0, 1.0, 0.0),  # the mover wins
        (TAKE_WIN, 6, 0.0, -1.0),  # an ordinary move
        (TAKE_WIN, 3, -1.0, 0.0),  # into a full column: a forfeit
        (FINISHED, 2, 0.0, 0.0),  # after the end: still terminal, no reward
        (LAST_CELL, 6, 0.0, 0.0),  # fills the board: a draw
    ]
    states = env.stack([env.from_moves(m) for m, *_ in cases])
    actions = jnp.array([a for _, a, *_ in cases], jnp.int32)
    out, next_states = jax.jit(recurrent_fn)(variables, jax.random.key(0), actions, states)
    np.testing.assert_array_equal(out.reward, [c[2] for c in cases])
    np.testing.assert_array_equal(out.discount, [c[3] for c in cases])
    terminal = np.asarray(next_states.terminated)
    np.testing.assert_array_equal(terminal, [True, False, True, True, True])
    assert np.all(np.asarray(out.value)[terminal] == 0)
    legal = np.asarray(env.legal_action_mask(next_states))
    assert np.all(np.asarray(out.prior_logits)[~legal] < -1e30)
    assert np.all(np.isfinite(out.prior_logits))
    for field in ("reward", "discount", "value", "prior_logits"):
        assert getattr(out, field).dtype == jnp.float32


def test_rejects_unknown_algorithm():
    apply_fn, _ = _network()
    bad = dataclasses.replace(SearchConfig(), algorithm="ucb")
    with pytest.raises(ValueError, match="search.algorithm"):
        search.make_search(apply_fn, bad)
