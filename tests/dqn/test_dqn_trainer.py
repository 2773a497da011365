"""The fused value-based iteration: what it stores, whom it plays, and that it learns."""

import dataclasses
import functools

import jax
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.dqn import config as dqn_config
from c4jax.dqn import trainer
from c4jax.judge import arena


def _config(**train):
    base = dqn_config.load("tiny")
    return dqn_config.validate(
        dataclasses.replace(base, train=dataclasses.replace(base.train, **train))
    )


@pytest.fixture(scope="module")
def after_two():
    run = trainer.make_trainer(_config(num_envs=64, env_steps=8))
    iteration = jax.jit(run.iteration)
    state = jax.jit(run.init)(jax.random.key(0))
    metrics = None
    for i in range(2):
        state, metrics = iteration(state, jax.random.key(i + 1))
    return state, jax.device_get(metrics)


def test_transitions_are_seen_from_the_learners_side(after_two):
    state, metrics = after_two
    size = int(state.replay.size)
    assert size == 2 * 64 * 8
    rows = jax.tree.map(lambda x: np.asarray(x)[:size], state.replay.data)
    s, s2 = rows.state, rows.next_state
    learner_player = s.num_moves % 2
    assert not np.any(s.terminated)  # the learner moves in live games only
    legal = np.asarray(env.legal_action_mask(rows.state))
    assert np.all(legal[np.arange(size), rows.action])
    assert set(np.unique(rows.reward)) <= {-1.0, 0.0, 1.0}
    assert np.all(rows.reward[~rows.done] == 0)  # rewards only at the end
    won, lost = rows.done & (rows.reward == 1), rows.done & (rows.reward == -1)
    assert np.all(s2.winner[won] == learner_player[won])
    assert np.all(s2.winner[lost] == 1 - learner_player[lost])
    assert won.sum() > 0 and lost.sum() > 0
    # A game that goes on: the learner moved, the opponent replied, the learner is to move.
    going = ~rows.done
    assert np.all(s2.num_moves[going] == s.num_moves[going] + 2)
    # A win on the learner's own move leaves the opponent no reply.
    quick = won & (s2.num_moves == s.num_moves + 1)
    assert quick.sum() >= 0 and np.all(s2.terminated[rows.done])
    assert metrics["games_finished"] > 0 and np.isfinite(metrics["loss"])


def test_games_restart_with_the_learner_to_move(after_two):
    state, _ = after_two
    games = jax.device_get(state.games)
    assert not np.any(games.state.terminated)
    opponents = np.asarray(games.opponent)
    assert set(np.unique(opponents)) <= {0, 1, 2, 3}


def test_opponent_mix_follows_the_weights():
    config = _config(num_envs=512, opponent_random=0.0, opponent_win=1.0,
                     opponent_lookahead=0.0, opponent_self=3.0)
    state = jax.jit(trainer.make_trainer(config).init)(jax.random.key(0))
    counts = np.bincount(np.asarray(state.games.opponent), minlength=4)
    assert counts[0] == counts[2] == 0
    assert 0.65 < counts[3] / 512 < 0.85
    # Half the games have the learner second, the opponent's first stone already down.
    second = np.asarray(state.games.state.num_moves) == 1
    assert 0.4 < second.mean() < 0.6


@pytest.mark.parametrize("weights, only", [
    ((0.0, 1e-46, 0.0, 0.0), 1),  # 0 in float32, yet the only opponent with a weight
    ((0.0, 1e39, 0.0, 1e39), None),  # inf in float32: still an even mix of the two
])
def test_opponent_weights_of_any_finite_size_keep_their_mix(weights, only):
    names = ("opponent_random", "opponent_win", "opponent_lookahead", "opponent_self")
    config = _config(num_envs=512, **dict(zip(names, weights, strict=True)))
    state = jax.jit(trainer.make_trainer(config).init)(jax.random.key(0))
    counts = np.bincount(np.asarray(state.games.opponent), minlength=4)
    if only is not None:
        assert counts[only] == 512, counts
    else:
        assert counts[0] == counts[2] == 0 and 0.4 < counts[3] / 512 < 0.6, counts


def test_epsilon_decays_linearly_then_stays():
    config = _config(num_iterations=100, epsilon_start=1.0, epsilon_end=0.1, epsilon_decay=0.5)
    values = [float(trainer.epsilon_at(config, step)) for step in (0, 25, 50, 99)]
    np.testing.assert_allclose(values, [1.0, 0.55, 0.1, 0.1], atol=1e-6)
    # No decay: the end rate from the first iteration (a run of one iteration exploits).
    flat = _config(num_iterations=100, epsilon_start=1.0, epsilon_end=0.1, epsilon_decay=0.0)
    assert [float(trainer.epsilon_at(flat, step)) for step in (0, 1, 99)] == pytest.approx(
        [0.1, 0.1, 0.1])


def test_a_short_training_run_learns_to_beat_random():
    """A small MLP against random opponents for a few seconds of play: clearly better than
    before (measured: 0.70 -> 0.875 of 400 games)."""
    config = _config(num_iterations=30, num_envs=256, env_steps=8, replay_capacity=30_000,
                     minibatch_size=256, sgd_steps=8, epsilon_decay=0.3, learning_rate=0.003,
                     opponent_random=1.0, opponent_win=0.0, opponent_lookahead=0.0,
                     opponent_self=0.0)
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, hidden="64"))
    run = trainer.make_trainer(config)
    iteration = jax.jit(run.iteration)
    state = jax.jit(run.init)(jax.random.key(3))

    def score(params):
        agent = functools.partial(trainer.q_act, run.apply, params)
        return arena.play_games(agent, baselines.random_agent, jax.random.key(7), 400).score

    before = score(state.learner.params)
    for i in range(config.train.num_iterations):
        state, _ = iteration(state, jax.random.key(100 + i))
    after = score(state.learner.params)
    assert after >= 0.8 and after > before + 0.1, (before, after)
