"""Loss, optimizer and one SGD step of the policy-value network.

loss = policy cross-entropy + value_loss_weight * value MSE (+ L2 with sgd;
AdamW decays the weights itself). Shape letters: B minibatch, A = 7 actions.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax import struct

from c4jax.alphazero.config import TrainConfig
from c4jax.replay import Minibatch

_KL_BAND = 2.0  # leave [target / band, target * band] to adapt the rate
_KL_FACTOR = 1.5  # shrink or grow by this factor
_KL_SCALE_RANGE = (0.01, 10.0)


@struct.dataclass
class LearnerState:
    """Everything one SGD step reads and writes."""

    params: dict
    batch_stats: dict
    opt_state: optax.OptState
    lr_scale: jax.Array  # [] float32, the KL-adaptive multiplier (1 when off)


def make_schedule(config: TrainConfig, total_steps: int) -> optax.Schedule:
    """Linear warm-up to ``learning_rate``, then constant or cosine to 10%; or
    ``onecycle``: a cosine rise from 4% of the peak over the first 30% of the
    steps, then a cosine fall to ~0 at the last (``warmup_steps`` unused)."""
    peak = config.learning_rate
    if config.lr_schedule == "onecycle":
        return optax.cosine_onecycle_schedule(
            max(total_steps, 1), peak, pct_start=0.3, div_factor=25.0, final_div_factor=1e4
        )
    warmup = max(config.warmup_steps, 0)
    if config.lr_schedule == "cosine":
        decay = max(total_steps - warmup, 1)
        after = optax.cosine_decay_schedule(peak, decay, alpha=0.1)
    else:
        after = optax.constant_schedule(peak)
    if warmup == 0:
        return after
    ramp = optax.linear_schedule(0.0, peak, warmup)
    return optax.join_schedules([ramp, after], [warmup])


def make_optimizer(config: TrainConfig, total_steps: int) -> optax.GradientTransformation:
    """AdamW with decoupled weight decay, or SGD with momentum 0.9."""
    schedule = make_schedule(config, total_steps)
    if config.optimizer == "adamw":
        return optax.adamw(schedule, weight_decay=config.weight_decay)
    return optax.sgd(schedule, momentum=0.9)


def _l2(params) -> jax.Array:
    leaves = [p for p in jax.tree.leaves(params) if p.ndim > 1]  # kernels, not biases/scales
    return sum(jnp.sum(jnp.square(p)) for p in leaves)


def make_sgd_step(
    network, optimizer: optax.GradientTransformation, config: TrainConfig
) -> Callable:
    """Returns ``sgd_step(learner_state, minibatch) -> (learner_state, metrics)``."""
    l2_weight = config.weight_decay if config.optimizer == "sgd" else 0.0

    def loss_fn(params, batch_stats, batch: Minibatch):
        (logits, value), updates = network.apply(
            {"params": params, "batch_stats": batch_stats},
            batch.obs,
            train=True,
            mutable=["batch_stats"],
        )
        policy_loss = optax.softmax_cross_entropy(logits, batch.policy).mean()
        value_loss = jnp.mean(jnp.square(value - batch.value))
        loss = policy_loss + config.value_loss_weight * value_loss
        if l2_weight:
            loss = loss + l2_weight * _l2(params)
        log_p = jax.nn.log_softmax(logits)
        entropy = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1).mean()
        metrics = {
            "loss": loss,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "policy_entropy": entropy,
        }
        return loss, (updates["batch_stats"], metrics)

    def sgd_step(state: LearnerState, batch: Minibatch):
        grads, (batch_stats, metrics) = jax.grad(loss_fn, has_aux=True)(
            state.params, state.batch_stats, batch
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        updates = jax.tree.map(lambda u: u * state.lr_scale, updates)
        params = optax.apply_updates(state.params, updates)
        lr_scale = state.lr_scale
        if config.kl_target > 0:
            # Both sides in inference mode, so the KL measures the update only.
            def inference_log_p(params, batch_stats):
                logits, _ = network.apply(
                    {"params": params, "batch_stats": batch_stats}, batch.obs, train=False
                )
                return jax.nn.log_softmax(logits)

            log_p = inference_log_p(state.params, state.batch_stats)
            new_log_p = inference_log_p(params, batch_stats)
            kl = jnp.sum(jnp.exp(log_p) * (log_p - new_log_p), axis=-1).mean()
            lr_scale = jnp.where(kl > config.kl_target * _KL_BAND, lr_scale / _KL_FACTOR, lr_scale)
            lr_scale = jnp.where(kl < config.kl_target / _KL_BAND, lr_scale * _KL_FACTOR, lr_scale)
            lr_scale = jnp.clip(lr_scale, *_KL_SCALE_RANGE)
            metrics = {**metrics, "kl": kl}
        metrics = {**metrics, "grad_norm": optax.tree.norm(grads), "lr_scale": lr_scale}
        new_state = LearnerState(
            params=params, batch_stats=batch_stats, opt_state=opt_state, lr_scale=lr_scale
        )
        return new_state, metrics

    return sgd_step
