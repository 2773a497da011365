"""The TD targets (double and plain) and the SGD step on hand-made transitions."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from c4jax import env
from c4jax.dqn import learner, qnet
from c4jax.dqn.config import DQNTrainConfig, ModelConfig

ALL = jnp.ones((1, 7), bool)


def _target(q_online, q_target, legal=ALL, reward=0.0, done=False, *, double, gamma=0.9):
    return float(learner.td_target(
        jnp.asarray([q_online], jnp.float32), jnp.asarray([q_target], jnp.float32),
        legal, jnp.asarray([reward], jnp.float32), jnp.asarray([done]),
        gamma=gamma, double=double,
    )[0])


def test_double_picks_with_online_and_values_with_target():
    online = [1.0, 5.0, 0, 0, 0, 0, 0]
    target = [3.0, 2.0, 0, 0, 0, 0, 0]
    assert _target(online, target, double=True) == pytest.approx(0.9 * 2.0)  # target's value of 1
    assert _target(online, target, double=False) == pytest.approx(0.9 * 3.0)  # max of target


def test_illegal_moves_are_never_the_next_move():
    online = [1.0, 5.0, 0, 0, 0, 0, 0]
    target = [3.0, 9.0, 0, 0, 0, 0, -1]
    legal = jnp.asarray([[True, False, True, True, True, True, True]])  # column 2 full
    assert _target(online, target, legal, double=True) == pytest.approx(0.9 * 3.0)
    assert _target(online, target, legal, double=False) == pytest.approx(0.9 * 3.0)


def test_a_finished_game_is_its_reward():
    for reward in (1.0, 0.0, -1.0):
        for double in (True, False):
            assert _target([5.0] * 7, [5.0] * 7, reward=reward, done=True, double=double) == reward
    # A next position without legal moves counts as over too.
    none = jnp.zeros((1, 7), bool)
    assert _target([5.0] * 7, [5.0] * 7, none, reward=-1.0, double=True) == -1.0


def _transitions(moves, action, reward, next_moves, done):
    return learner.Transitions(
        state=env.stack([env.from_moves(moves)]),
        action=jnp.asarray([action], jnp.int32),
        reward=jnp.asarray([reward], jnp.float32),
        next_state=env.stack([env.from_moves(next_moves)]),
        done=jnp.asarray([done]),
    )


def test_mirroring_keeps_the_transition_consistent():
    # x plays column 1 (index 0) on "4453", o answers column 7: mirrored, x plays column 7.
    t = _transitions("4453", 0, 0.0, "445317", False)
    t = jax.tree.map(lambda x: jnp.repeat(x, 64, axis=0), t)
    batch = learner.to_batch(t, jax.random.key(0), mirror=True)
    plain = learner.to_batch(t, jax.random.key(0), mirror=False)
    flipped = np.asarray(batch.action) == 6
    assert 10 < flipped.sum() < 54 and np.all(np.asarray(batch.action)[~flipped] == 0)
    np.testing.assert_array_equal(batch.obs[flipped], env.mirror_observation(plain.obs)[flipped])
    np.testing.assert_array_equal(
        batch.next_obs[flipped], env.mirror_observation(plain.next_obs)[flipped]
    )
    np.testing.assert_array_equal(batch.obs[~flipped], plain.obs[~flipped])


def _learner_state(tau):
    module = qnet.make_q_network(ModelConfig(kind="mlp", hidden="32"))
    apply = qnet.make_apply(module)
    params = qnet.init_params(module, jax.random.key(0))
    optimizer = optax.adam(1e-2)
    train = DQNTrainConfig(target_tau=tau, gamma=0.9)
    state = learner.QLearnerState(
        params=params, target_params=jax.tree.map(jnp.copy, params),
        opt_state=optimizer.init(params),
    )
    return apply, jax.jit(learner.make_sgd_step(apply, optimizer, train)), state


def test_sgd_fits_a_won_position_and_updates_the_target_softly():
    # x wins by playing column 1 (index 0): Q(s, 0) must go to +1.
    batch = learner.to_batch(
        _transitions("121212", 0, 1.0, "1212121", True), jax.random.key(0), mirror=False
    )
    apply, sgd, state = _learner_state(tau=0.01)
    before = state
    for _ in range(200):
        state, metrics = sgd(state, batch)
    assert float(apply(state.params, batch.obs)[0, 0]) == pytest.approx(1.0, abs=0.05)
    assert float(metrics["loss"]) < 1e-3
    # The target moved towards the online network, but only part of the way.
    online, target, start = (jax.tree.leaves(p)[0] for p in
                             (state.params, state.target_params, before.params))
    moved = float(jnp.linalg.norm(target - start) / jnp.linalg.norm(online - start))
    assert 0.1 < moved < 0.95


def test_tau_one_means_no_target_network():
    batch = learner.to_batch(
        _transitions("4453", 0, 0.0, "445317", False), jax.random.key(0), mirror=False
    )
    _, sgd, state = _learner_state(tau=1.0)
    state, _ = sgd(state, batch)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(state.target_params),
                    strict=True):
        np.testing.assert_array_equal(a, b)
