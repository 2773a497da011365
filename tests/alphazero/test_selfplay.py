"""Self-play: value targets for both players, tails carried across chunks, no waste."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import env, replay
from c4jax.alphazero import search, selfplay


# A scripted "search": the first player always plays column 1, the second
# column 2, so every game is 1212121 and the first player wins on move 7:
#   .......
#   .......
#   x......
#   xo.....
#   xo.....
#   xo.....
def _scripted(variables, key, state):
    action = jnp.where(state.current_player == 0, 0, 1).astype(jnp.int32)
    policy = jax.nn.one_hot(action, 7)
    value = jnp.where(state.current_player == 0, 0.5, -0.5)  # a made-up search value
    return search.SearchOutput(
        action=action, policy=policy, root_value=value, policy_value=value
    )


def _run(num_steps, chunks, batch=3, **options):
    play = jax.jit(selfplay.make_selfplay(_scripted, num_steps=num_steps, **options))
    sp = selfplay.init(batch, final_board=options.get("final_board_targets", False))
    out = []
    for i in range(chunks):
        sp, positions, valid, metrics = play({}, jax.random.key(i), sp)
        out.append((positions, np.asarray(valid), jax.device_get(metrics)))
    return sp, out


def test_value_targets_have_the_right_sign_for_both_players():
    _, [(positions, valid, metrics)] = _run(num_steps=7, chunks=1)
    assert valid.sum() == 7 * 3
    player = np.asarray(positions.state.current_player)[valid]
    value = np.asarray(positions.value)[valid]
    np.testing.assert_array_equal(value, np.where(player == 0, 1.0, -1.0))
    assert metrics["games_finished"] == 3
    assert metrics["first_player_win_rate"] == 1.0
    assert metrics["game_length"] == 7


def test_unfinished_games_are_carried_not_discarded():
    # Chunks of 3 moves: the 7-move games span three chunks.
    sp, out = _run(num_steps=3, chunks=3)
    counts = [v.sum() for _, v, _ in out]
    assert counts == [0, 0, 7 * 3]  # all positions arrive once their game ends
    assert all(m["discarded_fraction"] == 0 for _, _, m in out)
    positions, valid, _ = out[-1]
    moves = np.asarray(positions.state.num_moves)[valid]
    assert sorted(moves.tolist()) == sorted(list(range(7)) * 3)  # each position exactly once
    # After 9 moves each game is 2 moves into its second game: 2 rows wait in the tail.
    np.testing.assert_array_equal(np.asarray(sp.tail.valid).sum(0), [2, 2, 2])
    np.testing.assert_array_equal(np.asarray(sp.games.num_moves), [2, 2, 2])


def _board(rows):
    """[H, W, 3] one-hot planes (mover's stones, opponent's, empty) of an ASCII board."""
    chars = np.array([list(r) for r in rows])
    return np.stack([chars == "m", chars == "o", chars == "."], axis=-1).astype(np.float32)


# The scripted games' last board (1212121), from each mover's side.
_FINAL_FIRST = _board([".......", ".......", "m......", "mo.....", "mo.....", "mo....."])
_FINAL_SECOND = _board([".......", ".......", "o......", "om.....", "om.....", "om....."])


def test_final_board_targets_are_the_games_last_board_from_each_movers_side():
    # Chunks of 3 moves: the games' first positions wait two chunks in the tail.
    sp, out = _run(num_steps=3, chunks=3, final_board_targets=True)
    positions, valid, _ = out[-1]
    planes = np.asarray(replay.final_board_planes(positions.final_board))[valid]
    player = np.asarray(positions.state.current_player)[valid]
    assert len(player) == 7 * 3
    for board, mover in zip(planes, player, strict=True):
        np.testing.assert_array_equal(board, _FINAL_FIRST if mover == 0 else _FINAL_SECOND)
    chex.assert_trees_all_equal_shapes_and_dtypes(sp, selfplay.init(3, final_board=True))


def test_final_board_targets_need_the_tails_to_keep_the_boards():
    play = selfplay.make_selfplay(_scripted, num_steps=3, final_board_targets=True)
    with pytest.raises(ValueError, match="final_board=True"):
        play({}, jax.random.key(0), selfplay.init(3))


def test_final_boards_keep_unfinished_games_empty():
    states = [env.from_moves(m) for m in ("", "1", "12", "")]
    after = [env.from_moves(m) for m in ("1", "12", "123", "4")]
    done = jnp.array([[False], [False], [True], [False]])
    words = jnp.stack([selfplay.first_player_words(a) for a in after])[:, None]
    player = jnp.array([[s.current_player] for s in states])
    final = np.asarray(selfplay.final_boards(done, words, player))[:, 0]
    board = replay.final_board_planes(final)
    # x in columns 1 and 3, o in 2: the first player's side at moves 0 and 2, the other's at 1
    first = _board(["......."] * 5 + ["mom...."])
    second = _board(["......."] * 5 + ["omo...."])
    for t, want in enumerate((first, second, first)):
        np.testing.assert_array_equal(board[t], want)
    assert not final[3].any()  # its game goes on: no board yet


def test_game_results_marks_draws_and_unknown():
    done = jnp.array([[False], [True], [False], [True], [False]])
    winner = jnp.array([[-1], [-1], [-1], [1], [-1]])
    np.testing.assert_array_equal(
        selfplay.game_results(done, winner)[:, 0], [-1, -1, 1, 1, -2]
    )
    values = selfplay.value_targets(jnp.array([-1, 1, 1, 0]), jnp.array([0, 1, 0, 0]))
    np.testing.assert_array_equal(values, [0.0, 1.0, -1.0, 1.0])


def test_real_search_selfplay_runs_and_targets_are_valid():
    from c4jax.alphazero import config, network

    net = network.make_network(config.NetworkConfig(num_blocks=1, channels=8))
    variables = network.init_variables(net, jax.random.key(0))
    search_fn = search.make_search(
        network.make_apply_fn(net), config.SearchConfig(num_simulations=4)
    )
    play = jax.jit(selfplay.make_selfplay(search_fn, num_steps=16))
    sp, positions, valid, metrics = play(variables, jax.random.key(0), selfplay.init(8))
    rows = (selfplay.TAIL + 16) * 8  # the tail's and the chunk's candidate rows of B = 8 games
    chex.assert_shape(positions.policy, (rows, env.NUM_ACTIONS))
    chex.assert_shape([positions.value, valid], (rows,))
    chex.assert_type([positions.policy, positions.value, valid], [np.float32, np.float32, bool])
    chex.assert_trees_all_equal_shapes_and_dtypes(sp, selfplay.init(8))  # carried as it came
    valid = np.asarray(valid)
    assert valid.sum() > 0 and metrics["discarded_fraction"] == 0
    policy = np.asarray(positions.policy)[valid]
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    legal = np.asarray(env.legal_action_mask(positions.state))[valid]
    assert (policy[~legal] == 0).all()
    assert set(np.unique(np.asarray(positions.value)[valid])) <= {-1.0, 0.0, 1.0}


def test_value_target_mixes_the_result_with_the_search_value():
    _, [(positions, valid, _)] = _run(num_steps=7, chunks=1, value_target_q=0.25)
    player = np.asarray(positions.state.current_player)[valid]
    value = np.asarray(positions.value)[valid]
    # result +1 / -1 and search value +0.5 / -0.5 for the first / second player
    np.testing.assert_allclose(value, np.where(player == 0, 0.875, -0.875))


def test_lambda_returns_bootstrap_on_the_later_searches_of_the_same_game():
    #      game 1: the third move wins   game 2: the second move draws   running
    done = jnp.array([0, 0, 1, 0, 1, 0], bool)[:, None]
    terminal = jnp.array([0, 0, 1, 0, 0, 0], jnp.float32)[:, None]
    values = jnp.array([0.2, -0.4, 0.6, 0.1, 0.3, 0.9], jnp.float32)[:, None]
    got = selfplay.lambda_returns(done, terminal, values, 0.5)[:5, 0]
    # G2 = .5 * .6 + .5 * 1 = .8; G1 = .5 * -.4 - .5 * .8 = -.6; G0 = .1 + .3 = .4
    # G4 = .5 * .3 + .5 * 0 = .15; G3 = .05 - .075 = -.025 (game 1 does not leak in)
    np.testing.assert_allclose(got, [0.4, -0.6, 0.8, -0.025, 0.15], atol=1e-6)
    # lambda = 0 is the search value itself.
    np.testing.assert_allclose(selfplay.lambda_returns(done, terminal, values, 0.0), values)


def test_value_target_lambda_mixes_the_later_searches_into_the_target():
    # 1212121, search values +0.5 / -0.5 for the first / second player, the first
    # player wins with the move at 6 stones: G_6 = .5 * .5 + .5 * 1, G_t = .5 v_t - .5 G_{t+1}.
    _, [(positions, valid, _)] = _run(
        num_steps=7, chunks=1, value_target_q=1.0, value_target_lambda=0.5
    )
    moves = np.asarray(positions.state.num_moves)[valid]
    value = np.asarray(positions.value)[valid]
    want, later = {}, None
    for m in range(6, -1, -1):
        v = 0.5 if m % 2 == 0 else -0.5
        want[m] = 0.5 * v + 0.5 * (1.0 if later is None else -later)
        later = want[m]
    np.testing.assert_allclose(value, [want[m] for m in moves], rtol=1e-6)
    # The winner's side is valued above its own search's 0.5 near the end.
    assert value[moves == 6][0] == pytest.approx(0.75) and value[moves == 5][0] < -0.5
    # Games carried across chunks (a tail of 3 moves, then 3, then 1) get the same targets.
    _, chunks = _run(num_steps=3, chunks=3, value_target_q=1.0, value_target_lambda=0.5)
    positions, valid, _ = chunks[-1]
    moves = np.asarray(positions.state.num_moves)[valid]
    assert sorted(set(moves)) == list(range(7))
    np.testing.assert_allclose(
        np.asarray(positions.value)[valid], [want[m] for m in moves], rtol=1e-6
    )
    with pytest.raises(ValueError, match="value_target_lambda"):
        selfplay.make_selfplay(_scripted, num_steps=7, value_target_lambda=1.0)


def test_length_shaping_prefers_quick_wins_and_slow_losses():
    # 1212121: the position with m stones is 7 - m plies from the first player's win.
    _, [(positions, valid, _)] = _run(num_steps=7, chunks=1, value_length_shaping=0.5)
    moves = np.asarray(positions.state.num_moves)[valid]
    value = np.asarray(positions.value)[valid]
    sign = np.where(moves % 2 == 0, 1.0, -1.0)  # even: the winner to move
    np.testing.assert_allclose(value, sign * (1 - 0.5 * (7 - moves) / 42), rtol=1e-6)
    # The winner's last move is worth more than its first, the loser's last reply
    # less than its first (a slow loss is the lesser evil).
    assert value[moves == 6][0] > value[moves == 0][0] > 0
    assert value[moves == 5][0] < value[moves == 1][0] < 0


def test_plies_to_end_counts_to_each_games_end_and_zero_while_running():
    #            game 1 (3 moves)  game 2 (2 moves, from 0)  game 3 running
    done = jnp.array([0, 0, 1, 0, 1, 0, 0], bool)[:, None]
    num_moves = jnp.array([0, 1, 2, 0, 1, 0, 1])[:, None]
    np.testing.assert_array_equal(
        selfplay.plies_to_end(done, num_moves)[:, 0], [3, 2, 1, 2, 1, 0, 0]
    )


def test_randomised_marks_positions_up_to_the_last_random_move_of_their_game():
    #            game 1 (ends at t=3)    game 2 (ends at t=6)  game 3 (running)
    done = jnp.array([0, 0, 0, 1, 0, 0, 1, 0, 0], bool)[:, None]
    random = jnp.array([1, 1, 0, 0, 0, 1, 0, 1, 0], bool)[:, None]
    np.testing.assert_array_equal(
        selfplay.randomised(done, random)[:, 0], [1, 1, 0, 0, 1, 1, 0, 1, 0]
    )


def test_random_openings_play_k_moves_that_end_no_game():
    state, k = selfplay.random_openings(jax.random.key(0), 1024, 12)
    k = np.asarray(k)
    np.testing.assert_array_equal(np.asarray(state.num_moves), k)
    assert not np.asarray(state.terminated).any()  # a move that would win is drawn again
    counts = np.bincount(k, minlength=13)
    assert len(counts) == 13 and counts.min() > 1024 / 13 / 2  # k ~ U{0..12}
    boards = np.stack([state.own_lo, state.own_hi, state.all_lo, state.all_hi], axis=1)
    assert len(np.unique(boards, axis=0)) > 600  # varied positions, not a few lines


def test_random_openings_are_played_at_once_unsearched_and_never_trained_on():
    searched = 8 * 6 * 16  # moves x chunks x games, every one a search
    runs = {}
    for targets in ("drop", "search"):
        sp, out = _run(num_steps=8, chunks=6, batch=16, random_opening_moves=3,
                       opening_targets=targets)
        for positions, valid, metrics in out:
            assert metrics["discarded_fraction"] == 0
            if targets == "drop":
                # After the random moves the scripted players (x: column 1, o: column
                # 2) finish the game, so every trained position's game ends in a win.
                assert set(np.unique(np.asarray(positions.value)[valid])) <= {-1.0, 1.0}
        waiting = int(np.asarray(sp.tail.valid).sum())  # positions of the running games
        runs[targets] = (sum(v.sum() for _, v, _ in out) + waiting, out)
    # By default no search goes to a random move: every searched position is trained
    # on once its game ends. Searched one a step, a fifth or so of the searches are
    # the random moves (trained on here with the search targets).
    trained, out = runs["drop"]
    assert trained == searched
    assert all(m["random_move_fraction"] == 0 for _, _, m in out)
    opening = np.mean([m["opening_moves"] for _, _, m in out[1:]])
    assert 0.8 < opening < 2.2  # k ~ U{0..3}
    _, slow = runs["search"]
    random = np.mean([m["random_move_fraction"] for _, _, m in slow[1:]])
    assert 0.05 < random < 0.4


def test_opening_targets_search_trains_on_the_random_prefixes_with_the_search_targets():
    sp, out = _run(num_steps=8, chunks=6, batch=16, random_opening_moves=3,
                   opening_targets="search")
    prefixes = 0
    for positions, valid, metrics in out:
        assert metrics["positions_added"] == valid.sum()
        player = np.asarray(positions.state.current_player)[valid]
        value = np.asarray(positions.value)[valid]
        # The prefixes: value target = the scripted search value (+0.5 / -0.5); the
        # others keep the game result (+1 / -1).
        prefix = np.abs(value) == 0.5
        prefixes += prefix.sum()
        np.testing.assert_allclose(value[prefix], np.where(player[prefix] == 0, 0.5, -0.5))
        assert set(np.unique(np.abs(value))) <= {0.5, 1.0}
        # and the search policy as the policy target (the scripted one-hot move)
        np.testing.assert_allclose(np.asarray(positions.policy)[valid].max(-1), 1.0)
    assert prefixes > 0
    # Every search is trained on once its game ends, the random moves' too.
    waiting = int(np.asarray(sp.tail.valid).sum())
    assert sum(v.sum() for _, v, _ in out) + waiting == 8 * 6 * 16


def _scripted_fast(variables, key, state):
    """The scripted moves with another policy and value: marks a fast search's output."""
    out = _scripted(variables, key, state)
    return out.replace(policy=jnp.full_like(out.policy, 1 / 7), policy_value=0.0 * out.policy_value)


def test_playout_cap_trains_only_on_the_full_searches():
    # 28 moves = 4 whole games per slot, every step full or fast for the whole batch.
    _, [(positions, valid, metrics)] = _run(
        num_steps=28, chunks=1, fast_search_fn=_scripted_fast, full_search_fraction=0.5
    )
    full = metrics["full_search_fraction"]
    assert 0 < full < 1  # both kinds of move were played
    assert valid.sum() == round(full * 28) * 3  # the full searches' positions, all of them
    policy = np.asarray(positions.policy)[valid]
    assert np.all(policy.max(-1) == 1.0)  # every target is a full search's (one-hot) policy
    value = np.asarray(positions.value)[valid]
    player = np.asarray(positions.state.current_player)[valid]
    np.testing.assert_array_equal(value, np.where(player == 0, 1.0, -1.0))
    assert metrics["games_finished"] == 4 * 3  # the fast moves still played the games on


def test_playout_cap_needs_a_fast_search_and_a_fraction_in_range():
    with pytest.raises(ValueError, match="fast_search_fn"):
        selfplay.make_selfplay(_scripted, num_steps=2, full_search_fraction=0.5)
    with pytest.raises(ValueError, match="full_search_fraction"):
        selfplay.make_selfplay(
            _scripted, num_steps=2, fast_search_fn=_scripted_fast, full_search_fraction=0.0
        )


def test_opening_targets_must_be_drop_or_search():
    with pytest.raises(ValueError, match="opening_targets"):
        selfplay.make_selfplay(_scripted, num_steps=2, opening_targets="keep")


@pytest.mark.parametrize("field, bad", [
    ("num_steps", 0),  # no move searched: the metrics' shares would be 0 / 0
    ("value_target_q", 1.5),  # a lost game with q = 1 would get the target 2
    ("value_target_q", -0.1),
    ("random_opening_moves", -1),
    ("random_opening_moves", 42),
    ("surprise_start_moves", -1),  # the pool would never fill
])
def test_arguments_out_of_range_are_refused_by_name(field, bad):
    kwargs = {"num_steps": 2, field: bad}
    with pytest.raises(ValueError, match=f"^{field}: "):
        selfplay.make_selfplay(_scripted, **kwargs)
    kwargs[field] = {"num_steps": 1, "value_target_q": 1.0}.get(field, 0)  # the edge is fine
    selfplay.make_selfplay(_scripted, **kwargs)


def _counting_selfplay(algorithm, num_simulations, reuse, max_considered=7,
                       opening_targets="drop"):
    """A real-network self-play whose network counts the positions it evaluates."""
    from c4jax.alphazero import config, network

    net = network.make_network(config.NetworkConfig(num_blocks=1, channels=8))
    variables = network.init_variables(net, jax.random.key(0))
    inner = network.make_apply_fn(net)
    calls = []

    def apply_fn(variables, obs):
        jax.debug.callback(lambda n: calls.append(int(n)), obs.shape[0])
        return inner(variables, obs)

    search_config = config.SearchConfig(
        algorithm=algorithm, num_simulations=num_simulations,
        max_num_considered_actions=max_considered)
    play = jax.jit(selfplay.make_selfplay(
        search.make_search(apply_fn, search_config), num_steps=12, random_opening_moves=4,
        opening_targets=opening_targets,
        evaluate_fn=search.make_evaluate(apply_fn) if reuse else None))
    return play, variables, calls


@pytest.mark.parametrize("opening_targets", ["drop", "search"])
def test_roots_reuse_the_previous_searchs_evaluation(opening_targets):
    batch, steps, sims = 8, 12, 8
    results = {}
    for reuse in (False, True):
        play, variables, calls = _counting_selfplay("gumbel", sims, reuse,
                                                    opening_targets=opening_targets)
        sp = selfplay.init(batch)
        for chunk in range(3):
            calls.clear()
            sp, positions, valid, metrics = play(variables, jax.random.key(chunk), sp)
            jax.block_until_ready(valid)
            results[reuse, chunk] = (sorted(calls), positions, np.asarray(valid), metrics)
    for chunk in range(3):
        without, _, _, _ = results[False, chunk]
        with_reuse, positions, valid, metrics = results[True, chunk]
        # Without: a root and `sims` children per move. With: the root of the
        # chunk's first move, the starts once (by default the chunk's R openings a
        # game slot; the empty board where the random moves are searched), then
        # children only.
        assert without == [batch] * steps * (sims + 1)
        starts = [selfplay.OPENINGS_PER_SLOT * batch] if opening_targets == "drop" else [1]
        assert with_reuse == sorted(starts + [batch] * (1 + steps * sims))
        assert metrics["games_finished"] > 0  # restarts took their start's evaluation
        # The same games: the carried evaluations are the ones the network gives.
        _, p_without, v_without, _ = results[False, chunk]
        np.testing.assert_array_equal(valid, v_without)
        np.testing.assert_allclose(
            np.asarray(positions.policy), np.asarray(p_without.policy), atol=1e-4)


def test_a_root_the_search_did_not_expand_falls_back_to_the_network():
    # Gumbel considering 2 of 7 moves: a random opening move searched (in the games
    # that restart) often plays an unexpanded child, and then the next root runs the
    # network.
    batch, steps, sims = 8, 12, 4
    play, variables, calls = _counting_selfplay("gumbel", sims, True, max_considered=2,
                                                opening_targets="search")
    sp, roots, random = selfplay.init(batch), [], []
    for chunk in range(4):
        calls.clear()
        sp, positions, valid, metrics = play(variables, jax.random.key(chunk), sp)
        jax.block_until_ready(valid)
        roots.append(sorted(calls).count(batch) - steps * sims)
        random.append(float(metrics["random_move_fraction"]))
        legal = np.asarray(env.legal_action_mask(positions.state))[np.asarray(valid)]
        assert (np.asarray(positions.policy)[np.asarray(valid)][~legal] == 0).all()
    assert roots[0] == 1  # the first games open without random moves
    assert sum(random) > 0 and max(roots) > 1 and max(roots) <= steps


def test_next_policy_is_the_replys_search_policy_across_chunks():
    # 1212121 in chunks of 3 moves: games span three chunks and their tails.
    _, out = _run(num_steps=3, chunks=3, next_policy_targets=True)
    positions, valid, _ = out[-1]
    assert valid.sum() == 7 * 3
    moves = np.asarray(positions.state.num_moves)[valid]
    player = np.asarray(positions.state.current_player)[valid]
    reply = np.asarray(positions.next_policy)[valid]
    # The reply of the first player (column 1) is the second's column 2, and back;
    # the winning 7th move has none.
    want = np.eye(7)[np.where(player == 0, 1, 0)] * (moves < 6)[:, None]
    np.testing.assert_array_equal(reply, want)
    _, [(plain, _, _)] = _run(num_steps=3, chunks=1)
    assert plain.next_policy is None  # off by default: the buffer stays as it was


def test_next_policies_stop_at_the_game_end_and_at_fast_searches():
    policy = jnp.arange(1.0, 6.0)[:, None, None] * jnp.ones((5, 1, 7))  # row t holds t + 1
    done = jnp.array([False, True, False, False, False])[:, None]
    full = jnp.array([True, True, True, False, True])[:, None]
    got = np.asarray(selfplay.next_policies(policy, done, full))[:, 0, 0]
    # row 0: row 1's; row 1 ended its game; row 2's next was a fast search; row 3: row 4's;
    # the last row has no next row in the window.
    np.testing.assert_array_equal(got, [2.0, 0.0, 0.0, 5.0, 0.0])


def _scripted_with_prior(variables, key, state):
    """``_scripted``, with a network prior that already plays the first player's
    move (no surprise) and is uniform for the second player (surprise log 7)."""
    out = _scripted(variables, key, state)
    first = (state.current_player == 0)[:, None]
    prior = jnp.where(first, jnp.where(out.policy > 0, 0.0, -1e9), 0.0)
    return out.replace(prior_logits=prior)


def test_surprise_weights_favour_the_positions_the_search_overturned():
    # 1212121 in chunks of 3 moves: the surprise rides along the tails across chunks.
    play = jax.jit(selfplay.make_selfplay(
        _scripted_with_prior, num_steps=3, policy_surprise_weight=0.5))
    sp = selfplay.init(3, surprise=True)
    for chunk in range(3):
        sp, positions, valid, metrics = play({}, jax.random.key(chunk), sp)
    valid = np.asarray(valid)
    assert valid.sum() == 7 * 3
    player = np.asarray(positions.state.current_player)[valid]
    weight = np.asarray(positions.weight)[valid]
    # k is 0 on the first player's 4 moves a game and log 7 on the second's 3:
    # 0.5 + 0.5 * k / mean(k) = 0.5 and 0.5 + 0.5 * 7 / 3; they average 1.
    np.testing.assert_allclose(weight, np.where(player == 0, 0.5, 0.5 + 3.5 / 3), rtol=1e-5)
    np.testing.assert_allclose(weight.mean(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(metrics["policy_surprise"], 3 * np.log(7) / 7, rtol=1e-5)
    _, [(plain, _, plain_metrics)] = _run(num_steps=3, chunks=1)
    assert plain.weight is None and "policy_surprise" not in plain_metrics  # off by default


def test_policy_surprise_is_the_kl_from_the_prior_to_the_search_policy():
    policy = jnp.array([[0.5, 0.5, 0, 0, 0, 0, 0], [0.0] * 7])
    uniform = jnp.zeros((2, 7))
    got = np.asarray(selfplay.policy_surprise(policy, uniform))
    np.testing.assert_allclose(got, [np.log(7) - np.log(2), 0.0], rtol=1e-5)  # 0: game over
    agreeing = jnp.log(jnp.array([[0.5, 0.5, 1e-30, 1e-30, 1e-30, 1e-30, 1e-30]]))
    assert float(selfplay.policy_surprise(policy[:1], agreeing)[0]) < 1e-5
    # The search's masked logits (finfo.min on full columns) give finite values.
    legal = jnp.array([[True, True, False, False, False, False, False]] * 2)
    masked = search.mask_logits(jnp.zeros((2, 7)), legal)
    np.testing.assert_allclose(np.asarray(selfplay.policy_surprise(policy, masked)), 0.0,
                               atol=1e-6)


def test_surprise_weights_average_one_over_the_trained_positions_only():
    surprise = jnp.array([0.0, 2.0, 4.0, 100.0])
    trained = jnp.array([True, True, True, False])  # the last is not handed to the buffer
    got = np.asarray(selfplay.surprise_weights(surprise, trained, share=1.0))
    np.testing.assert_allclose(got[:3], [0.0, 1.0, 2.0])
    none = selfplay.surprise_weights(jnp.zeros(4), trained, share=0.5)  # no search: all weigh 1
    np.testing.assert_array_equal(np.asarray(none), np.ones(4))


def test_surprise_starts_replay_the_overturned_opening_positions():
    # Only the second player's positions surprise the scripted prior: only they enter
    # the pool, and about half of the new games start from them.
    play = jax.jit(selfplay.make_selfplay(
        _scripted_with_prior, num_steps=8, random_opening_moves=3, surprise_starts=0.5,
        surprise_start_moves=6))
    sp = selfplay.init(16, surprise=True, pool=64)
    trained, shares = 0, []
    for chunk in range(6):
        sp, positions, valid, metrics = play({}, jax.random.key(chunk), sp)
        trained += int(np.asarray(valid).sum())
        shares.append(float(metrics["pool_start_fraction"]))
        assert positions.weight is None  # no loss weights asked for
    size = int(sp.pool.size)
    state = jax.tree.map(lambda x: np.asarray(x)[:size], sp.pool.state)
    boards = {(a, b) for a, b in zip(state.own_lo, state.all_lo, strict=True)}
    assert 16 < size == len(boards)  # more than one chunk's worth, each board once
    np.testing.assert_allclose(np.asarray(sp.pool.surprise)[:size], np.log(7), rtol=1e-5)
    assert (state.current_player == 1).all() and (state.num_moves <= 6).all()
    assert shares[0] == 0 and 0.3 < np.mean(shares[2:]) < 0.7  # the pool is empty at first
    # Games from the pool waste no search: every searched position is trained on.
    assert trained + int(np.asarray(sp.tail.valid).sum()) == 8 * 6 * 16


def test_surprise_starts_need_random_openings_played_at_once():
    with pytest.raises(ValueError, match="surprise_starts needs random openings"):
        selfplay.make_selfplay(_scripted_with_prior, num_steps=3, surprise_starts=0.5)


def test_surprise_weight_must_be_a_share():
    with pytest.raises(ValueError, match="policy_surprise_weight"):
        selfplay.make_selfplay(_scripted, num_steps=3, policy_surprise_weight=1.5)
