"""Loss, optimizer and one SGD step of the policy-value network.

loss = policy cross-entropy + value_loss_weight * value MSE (+ L2 with sgd;
AdamW decays the weights itself), + opponent_policy_weight * the opponent-reply
head's cross-entropy against the next position's search policy when the network
has that head, + final_board_weight * the final-board head's cross-entropy
against the game's final board (averaged over the H x W cells) when it has
that one. Where the minibatch carries loss weights (``Minibatch.weight``,
policy surprise weighting), each example's terms are weighed by its weight.
Shape letters: B minibatch, A = 7 actions, H = 6 rows, W = 7 columns.
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


def make_schedule(config: TrainConfig, total_steps: int | jax.Array) -> optax.Schedule:
    """Linear warm-up to ``learning_rate``, then constant or cosine to 10%; or
    ``onecycle``: a cosine rise from 4% of the peak over the first 30% of the
    steps, then a cosine fall to ~0 at the last (``warmup_steps`` unused).

    ``total_steps`` may be a traced [] integer: the training step takes the run's
    length as an argument, so one compiled program serves every length (a time
    budget chooses it after compiling). The values are optax's
    ``cosine_decay_schedule`` and ``cosine_onecycle_schedule`` for an ``int``.
    """
    peak = config.learning_rate
    total = jnp.asarray(total_steps, jnp.int32)
    if config.lr_schedule == "onecycle":
        return _onecycle(peak, jnp.maximum(total, 1))
    warmup = max(config.warmup_steps, 0)
    if config.lr_schedule == "cosine":
        after = _cosine_decay(peak, jnp.maximum(total - warmup, 1), alpha=0.1)
    else:
        after = optax.constant_schedule(peak)
    if warmup == 0:
        return after
    ramp = optax.linear_schedule(0.0, peak, warmup)
    return optax.join_schedules([ramp, after], [warmup])


def schedule_count(opt_state: optax.OptState) -> jax.Array:
    """[] int32 the SGD steps the optimizer has taken: its learning-rate schedule's count.

    Iterations that do not learn (``train.min_replay_size``) leave the optimizer
    state as it was, so this can be behind iterations times ``sgd_steps``.
    """
    is_schedule = lambda x: isinstance(x, optax.ScaleByScheduleState)  # noqa: E731
    counts = [s.count for s in jax.tree.leaves(opt_state, is_leaf=is_schedule) if is_schedule(s)]
    if len(counts) != 1:
        raise ValueError(f"one learning-rate schedule expected, {len(counts)} found")
    return counts[0]


def _cosine_decay(peak: float, decay_steps: jax.Array, *, alpha: float) -> optax.Schedule:
    """``optax.cosine_decay_schedule(peak, decay_steps, alpha)`` for a traced count."""
    steps = decay_steps.astype(jnp.float32)

    def schedule(count):
        count = jnp.minimum(count, steps)
        cosine = 0.5 * (1 + jnp.cos(jnp.pi * count / steps))
        return peak * ((1 - alpha) * cosine + alpha)

    return schedule


def _onecycle(peak: float, total: jax.Array, *, div: float = 25.0,
              final_div: float = 1e4) -> optax.Schedule:
    """``optax.cosine_onecycle_schedule(total, peak, pct_start=0.3, div_factor=div,
    final_div_factor=final_div)`` for a traced ``total``: cosine from ``peak / div``
    up to ``peak`` over the first 30% of the steps, then down to ``peak / (div *
    final_div)`` at ``total``."""
    values = jnp.cumprod(jnp.stack([peak / div, div, 1.0 / (div * final_div)]))

    def schedule(count):
        # optax's boundaries are int(0.3 * total) and total.
        # floor(0.3 * total) without the int32 overflow of total * 3 (total < 2**31).
        bounds = jnp.stack([jnp.int32(0), total // 10 * 3 + total % 10 * 3 // 10, total])
        sizes = jnp.maximum(bounds[1:] - bounds[:-1], 1)
        inside = jnp.logical_and(bounds[:-1] <= count, count < bounds[1:])
        pct = (count - bounds[:-1]) / sizes
        start, end = values[:-1], values[1:]
        interpolated = end + (start - end) / 2.0 * (jnp.cos(jnp.pi * pct) + 1)
        return inside.dot(interpolated) + (bounds[-1] <= count) * values[-1]

    return schedule


def make_optimizer(
    config: TrainConfig, total_steps: int | jax.Array
) -> optax.GradientTransformation:
    """AdamW with decoupled weight decay, or SGD with momentum 0.9.

    ``total_steps`` (the schedule's length, possibly traced) does not change the
    optimizer state's structure, so ``init`` may use any.
    """
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
    opponent = getattr(network, "opponent_head", False)
    final_board = getattr(network, "final_board_head", False)
    sown = opponent or final_board

    def loss_fn(params, batch_stats, batch: Minibatch):
        (logits, value), updates = network.apply(
            {"params": params, "batch_stats": batch_stats},
            batch.obs,
            train=True,
            mutable=["batch_stats", "intermediates"] if sown else ["batch_stats"],
        )
        # [B] per-example losses. The loss weighs them with the minibatch's weights
        # (policy surprise weighting) where it has them; the metrics of its parts
        # (policy_loss, value_loss, opponent_policy_loss, final_board_loss) stay
        # unweighted.
        policy_losses = optax.softmax_cross_entropy(logits, batch.policy)
        value_losses = jnp.square(value - batch.value)
        policy_loss, value_loss = policy_losses.mean(), value_losses.mean()
        loss = policy_loss + config.value_loss_weight * value_loss
        if batch.weight is not None:
            per_example = policy_losses + config.value_loss_weight * value_losses
            loss = jnp.mean(batch.weight * per_example)
        extra = {}
        if opponent:
            if batch.next_policy is None:
                raise ValueError("the network's opponent head needs minibatches with "
                                 "next_policy (replay.init(..., next_policy=True))")
            (reply,) = updates["intermediates"]["opponent_logits"]
            # A zero target (the game ended with this move) adds nothing.
            opponent_losses = optax.softmax_cross_entropy(reply, batch.next_policy)
            extra = {"opponent_policy_loss": opponent_losses.mean()}
            if batch.weight is not None:
                opponent_losses = batch.weight * opponent_losses
            loss = loss + config.opponent_policy_weight * opponent_losses.mean()
        if final_board:
            if batch.final_board is None:
                raise ValueError("the network's final-board head needs minibatches with "
                                 "final_board (replay.init(..., final_board=True))")
            (board,) = updates["intermediates"]["final_board_logits"]  # [B, H, W, 3]
            board_losses = optax.softmax_cross_entropy(board, batch.final_board).mean(
                axis=(1, 2))  # [B]
            extra = {**extra, "final_board_loss": board_losses.mean()}
            if batch.weight is not None:
                board_losses = batch.weight * board_losses
            loss = loss + config.final_board_weight * board_losses.mean()
        if l2_weight:
            loss = loss + l2_weight * _l2(params)
        log_p = jax.nn.log_softmax(logits)
        entropy = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1).mean()
        metrics = {
            "loss": loss,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "policy_entropy": entropy,
            **extra,
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
