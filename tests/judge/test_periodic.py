"""Periodic evaluation: results and score, the solver sample, gating and promotion."""

import dataclasses

import jax
import numpy as np
import pytest

from c4jax.alphazero import config as config_lib
from c4jax.alphazero import search, trainer
from c4jax.judge import periodic


@pytest.fixture(scope="module")
def tiny():
    cfg = config_lib.load("tiny")
    run = trainer.Trainer(cfg)
    state = run.init(trainer.run_keys(0)[0])
    act = search.make_alphazero_act(run.apply_fn, cfg.search, num_simulations=4)
    return cfg, run, state, act


def test_evaluate_reports_matches_solver_sample_and_score(tiny):
    cfg, run, state, act = tiny
    eval_cfg = dataclasses.replace(cfg.eval, games=8, solver_positions=8, solver_sets="L1_R1,L3_R1")
    out = periodic.evaluate(act, run.variables(state), jax.random.key(0), eval_cfg)
    for key in ["win_rate/random", "win_rate/lookahead", "mistake/L1_R1", "mistake/L3_R1",
                "mistake_nontrivial/L1_R1", "mistake_rate"]:
        assert 0.0 <= out[key] <= 1.0, key
    assert out["score"] == pytest.approx(1 - out["mistake_rate"])  # matches saturate
    no_solver = dataclasses.replace(eval_cfg, solver_positions=0)
    out = periodic.evaluate(act, run.variables(state), jax.random.key(0), no_solver)
    assert "mistake_rate" not in out
    assert out["score"] == pytest.approx(np.mean([out["score/random"], out["score/lookahead"]]))


def test_gating_match_of_a_network_against_itself_is_even(tiny):
    _, run, state, act = tiny
    v = run.variables(state)
    match = periodic.gating_match(act, v, v, jax.random.key(1), num_games=16)
    assert match.score == 0.5  # paired openings, colours swapped, same deterministic agent


def test_gating_match_tells_networks_apart(tiny):
    cfg, run, state, act = tiny
    other = run.init(jax.random.key(123))
    match = periodic.gating_match(
        act, run.variables(state), run.variables(other), jax.random.key(1), num_games=32
    )
    assert len(set(match.outcomes.tolist())) > 1  # the random openings vary the games


def test_promote_then_donating_iteration_is_safe(tiny):
    cfg, _, _, _ = tiny
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, gating=0.55))
    run = trainer.Trainer(cfg)
    state = run.init(trainer.run_keys(0)[0])
    state, _ = run.iteration(state, jax.random.key(0))
    state = run.promote(state)
    promoted = zip(jax.tree.leaves(state.best), jax.tree.leaves(run.variables(state)), strict=True)
    for a, b in promoted:
        np.testing.assert_array_equal(a, b)
    before = jax.tree.map(np.asarray, state.best)
    state, metrics = run.iteration(state, jax.random.key(1))
    jax.block_until_ready(metrics)
    # Self-play used the frozen best network; the learner moved on.
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(state.best), strict=True):
        np.testing.assert_array_equal(a, b)
    pairs = zip(
        jax.tree.leaves(before["params"]), jax.tree.leaves(state.learner.params), strict=True
    )
    moved = [not np.array_equal(a, b) for a, b in pairs]
    assert any(moved)
