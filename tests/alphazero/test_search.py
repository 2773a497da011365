"""Behaviour of the mctx search with an untrained (randomly initialised) network.

The env is an exact model, so with enough simulations the search must see
one-move wins and threats whatever the network says. Positions are Pons move
strings (columns 1-7, first player first); boards are drawn top row first, ``x``
the first player, ``o`` the second. Actions are 0-based columns.

Compilation dominates the run time on CPU, so each (algorithm, mode) pair runs
one jitted search over one batch holding every position, and the tests read
that cached result.
"""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import env
from c4jax.alphazero import network, search
from c4jax.alphazero.config import NetworkConfig, SearchConfig

# Gumbel's sequential halving gives each of 7 root moves about sims / 21 visits
# in its first round, and with a flat prior a reply needs 8 visits to try all
# seven answers: 200 simulations see every one-move threat (128 miss some).
NUM_SIMULATIONS = 200
NET = NetworkConfig(num_blocks=2, channels=16, kernel_size=3)

# x can win now, and must take the win rather than block o's threat.
#   ...o...
#   ...x...
#   ...o...
#   x..x..o
#   x..o..o
#   x..x..o    x to move: column 1 (action 0) wins; column 4 is full.
TAKE_WIN = "444444171717"
# Three full columns; x completes the bottom row in column 4.
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
#   .....ox
#   ..o..xo
#   oxxx.ox    o to move: column 5 (action 4) blocks.
BLOCK_HORIZONTAL = "76677621334"
# x threatens both ends of the bottom row: o cannot stop the loss.
#   ..oo...
#   ..xxx..    o to move: x wins next in column 2 or 6.
LOST_O = "33445"
# The same with the colours swapped: x cannot stop o.
#   ..xx...
#   x.ooo..    x to move: o wins next in column 2 or 6.
LOST_X = "133445"
# A finished game: x has just won in column 1.
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
    # name: (moves, kind, the good actions)
    "take_win": (TAKE_WIN, "win", {0}),
    "win_full_columns": (WIN_FULL_COLUMNS, "win", {3}),
    "block_vertical": (BLOCK_VERTICAL, "block", {0}),
    "block_horizontal": (BLOCK_HORIZONTAL, "block", {4}),
    "lost_o": (LOST_O, "lost", set()),
    "lost_x": (LOST_X, "lost", set()),
}
NAMES = list(TACTICS)
NUM_EMPTY = 8  # empty boards: the opening moves are sampled in self-play
NUM_RANDOM = 24
MODES = [
    pytest.param(alg, ev, id=f"{alg}-{'eval' if ev else 'selfplay'}")
    for alg in ("gumbel", "puct")
    for ev in (False, True)
]


def _after(moves, column):
    """The position after playing 0-based ``column``, or None if it is full."""
    try:
        return env.from_moves(moves + str(column + 1))
    except ValueError:
        return None


def _wins_now(moves):
    """0-based columns that win at once for the player to move."""
    mover = len(moves) % 2
    return {c for c in range(7) if (s := _after(moves, c)) is not None and int(s.winner) == mover}


def _safe_moves(moves):
    """0-based legal columns after which the opponent cannot win at once."""
    return {
        c for c in range(7) if _after(moves, c) is not None and not _wins_now(moves + str(c + 1))
    }


def _random_positions(seed, count):
    """Move strings of live random games, biased to fill some columns early."""
    rng = np.random.default_rng(seed)
    positions = []
    while len(positions) < count:
        weights = rng.dirichlet(np.full(7, 0.5))
        length = int(rng.integers(8, 40))
        heights = [0] * 7
        moves = ""
        while len(moves) < length and not bool(env.from_moves(moves).terminated):
            open_cols = [c for c in range(7) if heights[c] < 6]
            col = int(rng.choice(open_cols, p=weights[open_cols] / weights[open_cols].sum()))
            heights[col] += 1
            moves += str(col + 1)
        if not bool(env.from_moves(moves).terminated):
            positions.append(moves)
    return positions


RANDOM = _random_positions(0, NUM_RANDOM)
ALL_MOVES = [TACTICS[n][0] for n in NAMES] + [FINISHED] + [""] * NUM_EMPTY + RANDOM
FINISHED_INDEX = len(NAMES)
EMPTY = slice(FINISHED_INDEX + 1, FINISHED_INDEX + 1 + NUM_EMPTY)


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
    """SearchOutput over ALL_MOVES as numpy arrays (default temperature_moves=10)."""
    config = SearchConfig(algorithm=algorithm, num_simulations=num_simulations)
    _, variables = _network(net_seed)
    out = _search_fn(config)(variables, jax.random.key(seed), _states(), evaluation=evaluation)
    return jax.tree.map(np.asarray, out)


def test_positions_are_as_documented():
    for name, (moves, kind, good) in TACTICS.items():
        assert not bool(env.from_moves(moves).terminated), name
        if kind == "win":
            assert _wins_now(moves) == good, name
        else:
            assert not _wins_now(moves), name
            assert _safe_moves(moves) == good, name
        # PUCT self-play plays its best move from move 10 on (temperature_moves).
        assert kind == "lost" or len(moves) >= SearchConfig().temperature_moves, name
    assert bool(env.from_moves(FINISHED).terminated)
    assert int(env.from_moves(FINISHED).winner) == 0
    last = env.from_moves(LAST_CELL + "7")
    assert bool(last.terminated) and int(last.winner) == -1
    legal = np.asarray(env.legal_action_mask(_states()))
    assert (~legal[: len(NAMES)]).any()  # full columns among the tactics
    assert (~legal[EMPTY.stop :]).any()  # and among the random positions


@pytest.mark.parametrize("algorithm, evaluation", MODES)
def test_output_shapes_and_dtypes(algorithm, evaluation):
    out = _result(algorithm, evaluation)
    b = len(ALL_MOVES)
    chex.assert_shape([out.action, out.root_value], (b,))
    chex.assert_shape(out.policy, (b, 7))
    chex.assert_type([out.action, out.policy, out.root_value], [np.int32, np.float32, np.float32])


@pytest.mark.parametrize("algorithm, evaluation", MODES)
def test_legal_moves_and_policy(algorithm, evaluation):
    out = _result(algorithm, evaluation)
    legal = np.asarray(env.legal_action_mask(_states()))
    live = legal.any(axis=1)
    assert live.sum() == len(ALL_MOVES) - 1
    assert np.all(legal[live, out.action[live]])
    assert np.all(out.policy[~legal] == 0)
    assert np.all(out.policy >= 0)
    np.testing.assert_allclose(out.policy[live].sum(axis=1), 1.0, atol=1e-5)
    assert np.all(np.abs(out.root_value) <= 1.0 + 1e-5)
    # The finished game: no move, no policy, the exact result (x has won).
    assert out.action[FINISHED_INDEX] == 0
    assert np.all(out.policy[FINISHED_INDEX] == 0)
    assert out.root_value[FINISHED_INDEX] == -1.0
    # and each move's Q is that root value, as for an unvisited move (not the network's)
    np.testing.assert_array_equal(out.qvalues[FINISHED_INDEX], np.full(7, -1.0, np.float32))


@pytest.mark.parametrize("num_simulations", [0, 4])
def test_a_finished_root_has_its_exact_value_in_every_field(num_simulations):
    """The network alone and the shallow search, as the 200-simulation tree above."""
    out = _result("gumbel", False, num_simulations=num_simulations)
    assert out.root_value[FINISHED_INDEX] == out.policy_value[FINISHED_INDEX] == -1.0
    np.testing.assert_array_equal(out.qvalues[FINISHED_INDEX], np.full(7, -1.0, np.float32))
    assert np.all(out.visit_counts[FINISHED_INDEX] == 0)


@pytest.mark.parametrize("algorithm, evaluation", MODES)
@pytest.mark.parametrize("name", ["take_win", "win_full_columns"])
def test_takes_a_win_in_one(algorithm, evaluation, name):
    out = _result(algorithm, evaluation)
    i = NAMES.index(name)
    assert out.action[i] in TACTICS[name][2]
    assert out.policy[i].argmax() in TACTICS[name][2]
    assert out.root_value[i] > 0


@pytest.mark.parametrize("algorithm, evaluation", MODES)
@pytest.mark.parametrize("name", ["block_vertical", "block_horizontal"])
def test_blocks_a_win_in_one(algorithm, evaluation, name):
    out = _result(algorithm, evaluation)
    i = NAMES.index(name)
    assert out.action[i] in TACTICS[name][2]
    assert out.policy[i].argmax() in TACTICS[name][2]


@pytest.mark.parametrize("algorithm, evaluation", MODES)
@pytest.mark.parametrize("name", ["lost_o", "lost_x"])
def test_root_value_negative_when_the_loss_cannot_be_stopped(algorithm, evaluation, name):
    assert _result(algorithm, evaluation).root_value[NAMES.index(name)] < 0


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_self_play_explores_and_evaluation_does_not(algorithm):
    played = _result(algorithm, False)
    best = _result(algorithm, True)
    # Eight empty boards: self-play noise (Gumbel noise; PUCT root Dirichlet
    # noise and sampling before move 10) varies the opening; evaluation does not.
    assert len(set(played.action[EMPTY].tolist())) > 1
    assert len(set(best.action[EMPTY].tolist())) == 1
    assert np.all(played.policy[EMPTY][np.arange(NUM_EMPTY), played.action[EMPTY]] > 0)
    # A new key changes self-play, and not evaluation.
    again = _result(algorithm, True, seed=2)
    np.testing.assert_array_equal(again.action, best.action)
    np.testing.assert_allclose(again.policy, best.policy, atol=1e-6)
    assert not np.allclose(_result(algorithm, False, seed=2).policy, played.policy, atol=1e-3)


def test_puct_plays_the_most_visited_move_from_move_10():
    out = _result("puct", False)
    num_moves = np.array([len(m) for m in ALL_MOVES])
    late = num_moves >= SearchConfig().temperature_moves
    late[FINISHED_INDEX] = False
    assert late.sum() > 10
    np.testing.assert_array_equal(out.action[late], out.policy[late].argmax(axis=1))


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
    # Two XLA programs (the jitted search, the network op by op): equal to rounding.
    np.testing.assert_allclose(out.policy[live], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.root_value[live], np.asarray(value)[live], rtol=1e-5,
                               atol=1e-6)
    assert np.all(legal[live, out.action[live]])
    assert np.all(out.policy[~legal] == 0)
    assert out.root_value[FINISHED_INDEX] == -1.0
    if evaluation:  # the highest prior, wherever the top two are not within rounding
        top2 = np.sort(masked, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-5  # far above float32 rounding there
        assert clear.sum() >= live.sum() // 2  # the check has rows
        np.testing.assert_array_equal(out.action[live][clear], masked.argmax(axis=1)[clear])
        np.testing.assert_array_equal(out.action[live], out.policy[live].argmax(axis=1))


def test_recurrent_fn_conventions():
    apply_fn, variables = _network()
    recurrent_fn = search.make_recurrent_fn(apply_fn)
    cases = [
        # (moves, action, reward for the mover, discount, next state terminal)
        (TAKE_WIN, 0, 1.0, 0.0, True),  # the mover wins
        (TAKE_WIN, 6, 0.0, -1.0, False),  # an ordinary move
        (TAKE_WIN, 3, -1.0, 0.0, True),  # into a full column: a forfeit
        (FINISHED, 2, 0.0, 0.0, True),  # after the end: still terminal, no reward
        (LAST_CELL, 6, 0.0, 0.0, True),  # the last cell: a draw
    ]
    states = env.stack([env.from_moves(c[0]) for c in cases])
    actions = jnp.array([c[1] for c in cases], jnp.int32)
    out, next_states = jax.jit(recurrent_fn)(variables, jax.random.key(0), actions, states)
    np.testing.assert_array_equal(out.reward, [c[2] for c in cases])
    np.testing.assert_array_equal(out.discount, [c[3] for c in cases])
    terminal = np.asarray(next_states.terminated)
    np.testing.assert_array_equal(terminal, [c[4] for c in cases])
    assert np.all(np.asarray(out.value)[terminal] == 0)
    assert np.asarray(out.value)[1] != 0  # the network's value
    legal = np.asarray(env.legal_action_mask(next_states))
    assert np.all(np.asarray(out.prior_logits)[~legal] < -1e30)
    assert np.all(np.isfinite(out.prior_logits))
    for field in ("reward", "discount", "value", "prior_logits"):
        assert getattr(out, field).dtype == jnp.float32


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_any_batch_size_takes_the_win_and_blocks_in_every_row(algorithm, batch_size):
    """A lone position and an odd batch: every row is searched as itself."""
    names = ["take_win", "block_horizontal", "block_vertical"][:batch_size]
    states = env.stack([env.from_moves(TACTICS[n][0]) for n in names])
    config = SearchConfig(algorithm=algorithm, num_simulations=NUM_SIMULATIONS)
    out = jax.tree.map(np.asarray, _search_fn(config)(
        _network()[1], jax.random.key(0), states, evaluation=True))
    assert out.action.shape == (batch_size,) and out.action.dtype == np.int32
    assert out.policy.shape == (batch_size, 7) and out.policy.dtype == np.float32
    for name, action in zip(names, out.action, strict=True):
        assert action in TACTICS[name][2], (name, action)


def test_rejects_bad_config():
    apply_fn, _ = _network()
    with pytest.raises(ValueError, match="search.algorithm"):
        search.make_search(apply_fn, dataclasses.replace(SearchConfig(), algorithm="ucb"))
    with pytest.raises(ValueError, match="search.num_simulations"):
        search.make_search(apply_fn, dataclasses.replace(SearchConfig(), num_simulations=-1))


@pytest.mark.parametrize("evaluation_move", ["policy", "q"])
def test_evaluation_move_choices_take_wins_and_block_losses(evaluation_move):
    config = SearchConfig(num_simulations=NUM_SIMULATIONS, evaluation_move=evaluation_move)
    _, variables = _network()
    out = _search_fn(config)(variables, jax.random.key(1), _states(), evaluation=True)
    out = jax.tree.map(np.asarray, out)
    for name in ["take_win", "win_full_columns", "block_vertical", "block_horizontal"]:
        assert out.action[NAMES.index(name)] in TACTICS[name][2], name
    live = ~np.asarray(_states().terminated)
    legal = np.asarray(env.legal_action_mask(_states()))
    assert legal[live, out.action[live]].all()


def test_a_larger_c_scale_follows_the_search_values_more_than_the_prior():
    """The completed-Q transform's c_scale weighs Q against the prior: with a
    larger one the improved policy puts more weight on the move that wins now
    (Q = 1, the largest possible), whatever the untrained network prefers."""
    _, variables = _network()
    states = env.stack([env.from_moves(TACTICS[n][0]) for n in ["take_win", "win_full_columns"]])
    weights = []
    for c_scale in (0.01, 1.0):
        config = SearchConfig(num_simulations=64, c_scale=c_scale)
        out = _search_fn(config)(variables, jax.random.key(1), states, evaluation=True)
        policy = np.asarray(out.policy)
        weights.append([policy[0, 0], policy[1, 3]])  # the winning columns
    assert np.all(np.asarray(weights[1]) > np.asarray(weights[0]))
    assert np.all(np.asarray(weights[1]) > 0.9)


def test_gumbel_noise_stops_after_gumbel_noise_moves_stones():
    """Self-play with the noise cut off at 10 stones: positions with 10 or more
    stones get evaluation's noiseless search, whatever the key; earlier ones,
    the empty boards among them, are still varied by the noise."""
    _, variables = _network()
    config = SearchConfig(num_simulations=NUM_SIMULATIONS, gumbel_noise_moves=10)
    search_fn = _search_fn(config)
    played = [
        jax.tree.map(np.asarray, search_fn(variables, jax.random.key(k), _states())) for k in (1, 2)
    ]
    best = _result("gumbel", True)
    num_moves = np.array([len(m) for m in ALL_MOVES])
    late = num_moves >= 10
    late[FINISHED_INDEX] = False
    assert late.sum() > 10 and (~late).sum() > 10
    # One program, two keys: with the noise off the key changes nothing, bit for bit.
    np.testing.assert_array_equal(played[0].action[late], played[1].action[late])
    np.testing.assert_array_equal(played[0].policy[late], played[1].policy[late])
    # And it is evaluation's search (another program, so equal up to rounding: the
    # move compared where the improved policy's top two are not near a tie).
    top2 = np.sort(best.policy, axis=1)[:, -2:]
    clear = late & (top2[:, 1] - top2[:, 0] > 1e-5)
    assert clear.sum() >= late.sum() // 2
    np.testing.assert_array_equal(played[0].action[clear], best.action[clear])
    np.testing.assert_allclose(played[0].policy[clear], best.policy[clear], atol=1e-4)
    assert len(set(played[0].action[EMPTY].tolist())) > 1
    assert not np.allclose(played[0].policy[~late], played[1].policy[~late], atol=1e-3)


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_policy_value_is_the_value_of_the_improved_policy(algorithm):
    out = _result(algorithm, True)
    for name in ["take_win", "win_full_columns"]:  # a sure win in one
        assert out.policy_value[NAMES.index(name)] > out.root_value[NAMES.index(name)]
        assert out.policy_value[NAMES.index(name)] > 0.5
    for name in ["lost_o", "lost_x"]:
        assert out.policy_value[NAMES.index(name)] < 0
    assert np.all(np.abs(out.policy_value) <= 1.0 + 1e-5)
    finished = FINISHED_INDEX
    assert out.policy_value[finished] == out.root_value[finished] == -1.0


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_the_children_evaluations_are_the_networks_on_the_child_positions(algorithm):
    # What self-play reuses as the next root: the stored evaluation of each
    # expanded child equals the network run on the position after that move.
    apply_fn, variables = _network()
    evaluate = jax.jit(search.make_evaluate(apply_fn))
    config = SearchConfig(algorithm=algorithm, num_simulations=16)
    states = _states()
    out = _search_fn(config)(variables, jax.random.key(3), states)
    legal = np.asarray(env.legal_action_mask(states))
    expanded = np.asarray(out.child_expanded)
    assert not expanded[FINISHED_INDEX].any() and (expanded <= legal).all()
    if algorithm == "gumbel":  # 16 simulations visit all of <= 7 considered moves
        np.testing.assert_array_equal(expanded, legal)
    assert expanded.sum() > len(ALL_MOVES)
    for a in range(env.NUM_ACTIONS):
        logits, value = evaluate(variables, env.step(states, jnp.full(len(ALL_MOVES), a)))
        rows = expanded[:, a]
        np.testing.assert_allclose(
            np.asarray(out.child_logits)[rows, a], np.asarray(logits)[rows], atol=1e-5
        )
        # a child that ends the game is stored with value 0 (its result is the reward)
        live = rows & ~np.asarray(env.step(states, jnp.full(len(ALL_MOVES), a)).terminated)
        np.testing.assert_allclose(
            np.asarray(out.child_value)[live, a], np.asarray(value)[live], atol=1e-5
        )


def test_a_given_root_evaluation_replaces_the_roots_network_call():
    apply_fn, variables = _network()
    evaluate = search.make_evaluate(apply_fn)
    search_fn = _search_fn(SearchConfig(num_simulations=16))
    states = _states()
    own = search_fn(variables, jax.random.key(4), states)
    given = search_fn(variables, jax.random.key(4), states, root_eval=evaluate(variables, states))
    # Two programs compute the root's evaluation, fused differently by XLA: equal up to
    # float32 rounding (a last-bit difference was seen), not bit for bit.
    chex.assert_trees_all_close(own, given, rtol=1e-5, atol=1e-6)
    # ... and it is really used: a uniform prior and zero value change the search.
    flat = (jnp.zeros((len(ALL_MOVES), env.NUM_ACTIONS)), jnp.zeros(len(ALL_MOVES)))
    other = search_fn(variables, jax.random.key(4), states, root_eval=flat)
    assert not np.array_equal(np.asarray(own.policy), np.asarray(other.policy))


def test_agents_of_one_network_shape_and_search_are_one_function():
    """Equal networks and settings give the same ``act`` (so its traces and compiled
    matches serve every checkpoint of that shape); other settings another one."""
    config = SearchConfig(num_simulations=8)
    first = network.make_apply_fn(network.make_network(NET))
    assert network.make_apply_fn(network.make_network(NET)) is first
    act = search.make_alphazero_act(first, config, num_simulations=8)
    assert search.make_alphazero_act(first, dataclasses.replace(config), num_simulations=8) is act
    assert search.make_alphazero_act(first, config, num_simulations=16) is not act
    other = network.make_apply_fn(network.make_network(dataclasses.replace(NET, channels=8)))
    assert other is not first
    assert search.make_alphazero_act(other, config, num_simulations=8) is not act


def _opening_search(games, small=8, large=NUM_SIMULATIONS):
    apply_fn, _ = _network()
    return jax.jit(search.make_opening_search(
        search.make_search(apply_fn, SearchConfig(num_simulations=small)),
        search.make_search(apply_fn, SearchConfig(num_simulations=large)),
        games=games), static_argnames="evaluation")


def test_the_opening_search_searches_the_games_with_fewest_stones_more():
    """K = 3: the two empty boards and the 11-stone block (the three positions with
    the fewest stones) get 200 simulations, in their own rows, and the opening one
    blocks; the 12- and 18-stone wins get 8."""
    moves = [WIN_FULL_COLUMNS, "", TAKE_WIN, "", BLOCK_VERTICAL]
    states = env.stack([env.from_moves(m) for m in moves])
    _, variables = _network()
    for evaluation in (False, True):
        out = _opening_search(3)(variables, jax.random.key(5), states, evaluation=evaluation)
        visits = np.asarray(out.visit_counts).sum(axis=1)
        np.testing.assert_array_equal(visits, [8, NUM_SIMULATIONS, 8, NUM_SIMULATIONS,
                                               NUM_SIMULATIONS])
        assert int(out.action[4]) == 0  # blocks column 1
        legal = np.asarray(env.legal_action_mask(states))
        assert np.all(legal[np.arange(len(moves)), np.asarray(out.action)])
        np.testing.assert_allclose(np.asarray(out.policy).sum(axis=1), 1.0, atol=1e-5)
    # Its rows are the larger search's own: the same evaluation of the empty board.
    alone = _search_fn(SearchConfig(num_simulations=NUM_SIMULATIONS))(
        variables, jax.random.key(5), env.stack([env.from_moves("")]), evaluation=True)
    np.testing.assert_allclose(np.asarray(out.prior_logits[1]), np.asarray(alone.prior_logits[0]),
                               rtol=1e-5, atol=1e-5)


def test_the_opening_search_takes_the_whole_batch_when_k_covers_it():
    _, variables = _network()
    states = env.stack([env.from_moves(m) for m in (TAKE_WIN, "")])
    out = _opening_search(5, large=16)(variables, jax.random.key(0), states)
    np.testing.assert_array_equal(np.asarray(out.visit_counts).sum(axis=1), [16, 16])
    with pytest.raises(ValueError, match="games"):
        search.make_opening_search(None, None, games=0)
