"""The Pons sets, checksums and the mistake-rate metric."""

import functools
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.judge import protocol, solver


def test_judge_moves_hand_made():
    # Scores for the player to move; None = full column (illegal).
    table = [
        # win available (11 at col 2); draw (0) elsewhere; losses
        [-4, -3, 11, 4, 0, -2, -5],
        # everything loses: trivial, no mistake possible
        [-1, -2, -3, -1, -5, -6, -7],
        # draw is best; one draw move, the rest lose; col 0 full
        [None, -2, -3, 0, -5, -6, -7],
        # two winning moves with different speeds
        [1, 3, -2, -2, -2, -2, -2],
    ]
    legal = np.array([[s is not None for s in row] for row in table])
    scores = np.array([[0 if s is None else s for s in row] for row in table])

    def judge(chosen):
        return solver.judge_moves(scores, legal, np.array(chosen))

    v = judge([2, 0, 3, 1])  # all best
    assert not v["mistake"].any() and v["exact_best"].all()
    np.testing.assert_array_equal(v["trivial"], [False, True, False, False])
    v = judge(
        [3, 4, 1, 0]
    )  # a slower win (no mistake, not exact), a loss-to-loss, a loss, slower win
    np.testing.assert_array_equal(v["mistake"], [False, False, True, False])
    np.testing.assert_array_equal(v["exact_best"], [False, False, False, False])
    v = judge([4, 4, 0, 2])  # draw instead of win, loss, illegal column, loss instead of win
    np.testing.assert_array_equal(v["mistake"], [True, False, True, True])
    np.testing.assert_array_equal(v["illegal"], [False, False, True, False])
    np.testing.assert_array_equal(v["best_sign"], [1, -1, 0, 1])
    np.testing.assert_array_equal(v["chosen_sign"][[0, 1, 3]], [0, -1, -1])
    summary = solver.summarize(v)
    assert summary["positions"] == 4 and summary["mistakes"] == 3
    assert summary["nontrivial"] == 3 and summary["nontrivial_mistakes"] == 3
    assert summary["nontrivial_mistake_rate"] == 1.0 and summary["illegal"] == 1
    low, high = summary["mistake_ci"]
    assert low < 0.75 < high


def test_mistakes_by_stage_places_each_mistake_and_names_what_it_gave_away():
    # Scores for the player to move; None = full column (illegal).
    table = [
        [-4, -3, 11, 4, 0, -2, -5],  # a win (col 2 or 3), a draw (col 4), losses
        [-1, -2, -3, -1, -5, -6, -7],  # everything loses: trivial
        [None, -2, -3, 0, -5, -6, -7],  # a draw at col 3, the rest lose; col 0 full
        [1, 3, -2, -2, -2, -2, -2],  # two winning moves
        [-4, -3, 11, 4, 0, -2, -5],
    ]
    legal = np.array([[s is not None for s in row] for row in table])
    scores = np.array([[0 if s is None else s for s in row] for row in table])
    num_moves = np.array([2, 15, 25, 41, 9])
    chosen = np.array([4, 0, 1, 2, 3])  # win->draw, no mistake, draw->loss, win->loss, fine
    stages = solver.mistakes_by_stage(num_moves, scores, legal, chosen)
    assert [s["stones"] for s in stages] == [[0, 9], [10, 19], [20, 29], [30, 41]]
    assert [s["positions"] for s in stages] == [2, 1, 1, 1]
    assert [s["nontrivial"] for s in stages] == [2, 0, 1, 1]
    assert [s["mistakes"] for s in stages] == [1, 0, 1, 1]
    assert [s["win_to_draw"] for s in stages] == [1, 0, 0, 0]
    assert [s["draw_to_loss"] for s in stages] == [0, 0, 1, 0]
    assert [s["win_to_loss"] for s in stages] == [0, 0, 0, 1]
    assert sum(s["illegal"] for s in stages) == 0
    # An illegal column is a mistake of its own kind; coarser stages add up.
    chosen[2] = 0
    two = solver.mistakes_by_stage(num_moves, scores, legal, chosen, edges=(0, 20, 42))
    assert [s["mistakes"] for s in two] == [1, 2]
    assert [s["illegal"] for s in two] == [0, 1] and two[1]["draw_to_loss"] == 0
    text = solver.format_stages(two)
    assert len(text.splitlines()) == 3 and "win->loss" in text
    for bad in [(0, 42, 20), (5, 42), (0, 20), (0,)]:
        with pytest.raises(ValueError, match="edges must increase"):
            solver.mistakes_by_stage(num_moves, scores, legal, chosen, edges=bad)


def test_sets_load_and_match_the_env():
    assert solver.verify_all() == [f"{n}.jsonl" for n in sorted(solver.STANDARD_SETS)]
    for name in solver.SET_NAMES:
        s = solver.load_set(name)
        assert len(s) == 1000
        assert s.move_scores.shape == (len(s), 7) and s.legal.any(axis=1).all()
        np.testing.assert_array_equal(np.where(s.legal, s.move_scores, -99).max(1), s.score)
    s = solver.load_set("L2_R2")
    states = jax.device_put(solver.states_from_moves(s.moves))
    np.testing.assert_array_equal(np.asarray(env.legal_action_mask(states)), s.legal)
    assert not np.asarray(states.terminated).any()
    reference = env.stack([env.from_moves(m) for m in s.moves[:40]])
    mine = solver.states_from_moves(s.moves[:40])
    for got, want in zip(jax.tree.leaves(mine), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(got, np.asarray(want))


def test_md5_catches_a_corrupted_file(tmp_path):
    for name in ("MD5SUMS", "L3_R1.jsonl"):
        shutil.copy(solver.DATA_DIR / name, tmp_path / name)
    assert len(solver.load_set("L3_R1", tmp_path)) == 1000
    data = bytearray((tmp_path / "L3_R1.jsonl").read_bytes())
    # Change a digit of a move score: the file stays valid JSON, only the MD5 can tell.
    i = data.index(b"move_scores")
    while not chr(data[i]).isdigit():
        i += 1
    data[i] = ord("9") if data[i] != ord("9") else ord("8")
    (tmp_path / "L3_R1.jsonl").write_bytes(bytes(data))
    with pytest.raises(solver.ChecksumError):
        solver.load_set("L3_R1", tmp_path)
    assert len(solver.load_set("L3_R1", tmp_path, verify=False)) == 1000
    with pytest.raises(FileNotFoundError):
        solver.load_set("L9_R9", tmp_path)


def test_random_mover_matches_its_exact_expectation():
    """Over all six pinned sets (6000 positions) the measured rate is within 4 sigma."""
    results = solver.evaluate_agent(baselines.random_agent, jax.random.PRNGKey(0))
    for name, r in results.items():
        s = solver.load_set(name)
        legal = s.legal
        signs = np.sign(s.move_scores)
        best = np.max(np.where(legal, signs, -2), axis=1, keepdims=True)
        p = (legal & (signs < best)).sum(1) / legal.sum(1)  # per-position mistake probability
        expected = solver.expected_random_mistake_rate(s)
        assert expected == pytest.approx(p.mean())
        sigma = np.sqrt(np.sum(p * (1 - p))) / len(p)
        assert abs(r["mistake_rate"] - expected) < 4 * sigma, (name, r["mistake_rate"], expected)
        assert r["illegal"] == 0 and r["positions"] == 1000
        # Random moves in the hard set (R3) lose a result about half the time.
        low, high = (0.45, 0.60) if name == "L1_R3" else (0.26, 0.43)
        assert low <= expected <= high, (name, expected)


def test_lookahead_improves_on_random_and_batching_is_consistent():
    key = jax.random.PRNGKey(1)
    look = solver.evaluate_agent(baselines.lookahead_agent, key, ["L3_R1"], 300)["L3_R1"]
    expected_random = solver.expected_random_mistake_rate(solver.load_set("L3_R1").head(300))
    assert look["positions"] == 300
    assert look["mistake_rate"] < expected_random - 0.05

    def column_of_first_legal(key, state):
        del key
        return jnp.argmax(env.legal_action_mask(state), axis=-1).astype(jnp.int32)

    s = solver.load_set("L2_R1").head(150)
    whole = solver.choose_moves(column_of_first_legal, key, s)
    chunked = solver.choose_moves(column_of_first_legal, key, s, batch_size=64)
    np.testing.assert_array_equal(whole, chunked)
    np.testing.assert_array_equal(whole, np.argmax(s.legal, axis=1))


def test_a_count_of_positions_below_one_is_refused():
    """Not a silent slice (``head(-1)`` was 999 of 1000) nor a bare error from inside."""
    key = jax.random.PRNGKey(0)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_positions: got"):
            solver.evaluate_agent(baselines.random_agent, key, ["L3_R1"], bad)
        with pytest.raises(ValueError, match="max_positions: got"):
            solver.load_set("L3_R1").head(bad)
    assert len(solver.load_set("L3_R1").head(1)) == 1
    assert len(solver.load_set("L3_R1").head(None)) == 1000


def test_set_names_and_batch_size_are_checked_before_any_set_is_evaluated(monkeypatch):
    """A bare "L1_R3" was read a letter at a time (no Pons set 'L'), and a typo in the
    last name was a FileNotFoundError after the sets before it were evaluated."""
    monkeypatch.setattr(solver, "choose_moves", lambda *a, **k: pytest.fail("evaluated"))
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match=r"set_names: got the string 'L1_R3'; give a sequence"):
        solver.evaluate_agent(baselines.random_agent, key, "L1_R3")
    with pytest.raises(ValueError, match=r"set_names: unknown \['L1R1'\], allowed: L3_R1"):
        solver.evaluate_agent(baselines.random_agent, key, ["L1_R3", "L1R1"])
    for bad in (0, -7, True):  # -7 ran one position a call
        with pytest.raises(ValueError, match="batch_size: got"):
            solver.evaluate_agent(baselines.random_agent, key, ["L3_R1"], batch_size=bad)


def test_partial_agents_reuse_the_compiled_function():
    def biased(bias, key, state):
        logits = jnp.where(env.legal_action_mask(state), bias, -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    before = len(protocol._cache)
    for bias in (jnp.zeros(7), jnp.arange(7.0)):
        solver.evaluate_agent(functools.partial(biased, bias), jax.random.PRNGKey(0), ["L3_R1"], 50)
    assert len(protocol._cache) == before + 1


def test_format_table():
    r = {"L1_R1": {"mistake_rate": 0.25, "nontrivial_mistake_rate": 0.5}}
    table = solver.format_table({"random": r})
    assert "| random | 25.0 / 50.0 |" in table


def test_host_agents_are_judged_like_jittable_ones():
    s = solver.load_set("L2_R1").head(50)

    def first_legal(key, state):
        return np.argmax(np.asarray(env.legal_action_mask(state)), axis=-1)

    moves = solver.choose_moves(protocol.HostAgent(first_legal), jax.random.PRNGKey(0), s,
                                batch_size=16)
    np.testing.assert_array_equal(moves, np.argmax(s.legal, axis=1))


def test_format_report():
    r = solver.evaluate_agent(baselines.random_agent, jax.random.PRNGKey(0), ["L3_R1"], 20)
    text = solver.format_report({"random": r})
    assert "L3_R1: 20 positions" in text and "exact best move" in text
