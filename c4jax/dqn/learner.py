"""Q-learning targets, the loss and one SGD step (with the soft target update).

A transition is seen from the learner's side: in ``state`` the learner moves
``action``; the opponent replies; ``next_state`` has the learner to move again
(or the game is over, ``done``). Rewards come only at the end: +1 win, 0 draw,
-1 loss. The target of Q(s, a) is ``r + gamma * (1 - done) * V(s')`` with

* double Q-learning: ``V(s') = Q_target(s', argmax_a' Q_online(s', a'))``;
* plain: ``V(s') = max_a' Q_target(s', a')``;

both over the legal moves of ``s'`` only. With ``target_tau = 1`` the target
network is the online one after every step (no target network).

Shapes: B minibatch, A = 7 actions, M transitions, H x W board.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax import struct

from c4jax import env
from c4jax.dqn.config import DQNTrainConfig
from c4jax.dqn.qnet import QApply


@struct.dataclass
class Transitions:
    """Transitions from the learner's side; leading dimension M (or C in the buffer)."""

    state: env.State  # [M] the learner to move
    action: jax.Array  # [M] int32 the learner's move
    reward: jax.Array  # [M] float32 +1 / 0 / -1 once the game is over, else 0
    next_state: env.State  # [M] the learner to move again, or a finished game
    done: jax.Array  # [M] bool the game ended in this transition


@struct.dataclass
class QBatch:
    """Network-ready transitions."""

    obs: jax.Array  # [B, H, W, 2] float32
    action: jax.Array  # [B] int32
    reward: jax.Array  # [B] float32
    next_obs: jax.Array  # [B, H, W, 2] float32
    next_legal: jax.Array  # [B, A] bool (all False when done)
    done: jax.Array  # [B] bool


@struct.dataclass
class QLearnerState:
    """What learning carries from step to step."""

    params: dict  # online network
    target_params: dict  # target network (soft-updated copy)
    opt_state: optax.OptState


def to_batch(transitions: Transitions, key: jax.Array, *, mirror: bool) -> QBatch:
    """Observation planes of ``transitions`` [B], each mirrored left-right with probability 1/2."""
    obs = env.observe(transitions.state)
    next_obs = env.observe(transitions.next_state)
    next_legal = env.legal_action_mask(transitions.next_state)
    action = transitions.action
    if mirror:
        flip = jax.random.bernoulli(key, 0.5, action.shape)
        obs = jnp.where(flip[:, None, None, None], env.mirror_observation(obs), obs)
        next_obs = jnp.where(flip[:, None, None, None], env.mirror_observation(next_obs), next_obs)
        next_legal = jnp.where(flip[:, None], env.mirror_policy(next_legal), next_legal)
        action = jnp.where(flip, env.mirror_action(action), action)
    return QBatch(obs=obs, action=action, reward=transitions.reward, next_obs=next_obs,
                  next_legal=next_legal, done=transitions.done)


def td_target(
    q_next_online: jax.Array,
    q_next_target: jax.Array,
    next_legal: jax.Array,
    reward: jax.Array,
    done: jax.Array,
    *,
    gamma: float,
    double: bool,
) -> jax.Array:
    """[B] targets ``r + gamma * (1 - done) * V(s')`` (see the module).

    Args:
        q_next_online: [B, A] the online network's values of ``s'``.
        q_next_target: [B, A] the target network's values of ``s'``.
        next_legal: [B, A] bool legal moves in ``s'``; a row without any counts as done.
        reward: [B] float32.
        done: [B] bool.
        gamma: discount.
        double: pick with the online network, value with the target one.
    """
    if double:
        best = jnp.argmax(jnp.where(next_legal, q_next_online, -jnp.inf), axis=-1)
        value = jnp.take_along_axis(q_next_target, best[:, None], axis=-1)[:, 0]
    else:
        value = jnp.max(jnp.where(next_legal, q_next_target, -jnp.inf), axis=-1)
    over = done | ~jnp.any(next_legal, axis=-1)
    return reward + gamma * jnp.where(over, 0.0, value)


def make_sgd_step(
    apply: QApply, optimizer: optax.GradientTransformation, train: DQNTrainConfig
) -> Callable[[QLearnerState, QBatch], tuple[QLearnerState, dict]]:
    """``sgd(state, batch) -> (state, metrics)``: one Adam step on the TD loss,
    then ``target <- target + tau * (online - target)``."""

    def loss_fn(params, target_params, batch: QBatch):
        q = apply(params, batch.obs)  # [B, A]
        q_taken = jnp.take_along_axis(q, batch.action[:, None], axis=-1)[:, 0]
        q_next_online = apply(params, batch.next_obs)
        q_next_target = apply(target_params, batch.next_obs)
        target = jax.lax.stop_gradient(td_target(
            q_next_online, q_next_target, batch.next_legal, batch.reward, batch.done,
            gamma=train.gamma, double=train.double,
        ))
        error = q_taken - target
        if train.loss == "huber":
            loss = jnp.mean(optax.huber_loss(error, delta=1.0))
        else:
            loss = jnp.mean(jnp.square(error))
        return loss, {"loss": loss, "q_mean": jnp.mean(q_taken), "td_abs": jnp.mean(jnp.abs(error))}

    def sgd(state: QLearnerState, batch: QBatch) -> tuple[QLearnerState, dict]:
        grads, metrics = jax.grad(loss_fn, has_aux=True)(state.params, state.target_params, batch)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        target = optax.incremental_update(params, state.target_params, step_size=train.target_tau)
        metrics["grad_norm"] = optax.tree.norm(grads)
        return QLearnerState(params=params, target_params=target, opt_state=opt_state), metrics

    return sgd
