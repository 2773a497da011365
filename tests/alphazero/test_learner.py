"""Learner: the loss falls on a fixed batch; schedules (optax's, for a traced run length
too); the KL-adaptive rate reacts."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from c4jax import env, replay
from c4jax.alphazero import config, learner, network, selfplay
from c4jax.alphazero.config import NetworkConfig, TrainConfig
from c4jax.replay import Minibatch


def _setup(train_config, **network_options):
    net = network.make_network(NetworkConfig(num_blocks=1, channels=8, **network_options))
    variables = network.init_variables(net, jax.random.key(0))
    opt = learner.make_optimizer(train_config, total_steps=100)
    state = learner.LearnerState(
        params=variables["params"],
        batch_stats=variables["batch_stats"],
        opt_state=opt.init(variables["params"]),
        lr_scale=jnp.float32(1.0),
    )
    step = jax.jit(learner.make_sgd_step(net, opt, train_config))
    states = env.stack([env.from_moves(m) for m in ["", "4", "44", "445", "4455", "12"]])
    batch = Minibatch(
        obs=env.observe(states),
        policy=jax.nn.one_hot(jnp.array([3, 3, 4, 2, 5, 0]), 7),
        value=jnp.array([1.0, -1.0, 1.0, -1.0, 0.0, 1.0]),
        # The replies; the last game ended with its move: no reply, all zeros.
        next_policy=jnp.concatenate(
            [jax.nn.one_hot(jnp.array([6, 0, 1, 5, 2]), 7), jnp.zeros((1, 7))]),
        final_board=_final_boards(),
    )
    return state, step, batch


@functools.cache
def _final_boards():
    """[6, H, W, 3] a different final-board target for each position (one-hot planes)."""
    return replay.final_board_planes(jnp.stack([
        selfplay.first_player_words(env.from_moves(m)) for m in
        ["1212121", "4455445544", "7676767", "12345671234567", "3344", "162534"]]))


def test_loss_falls_on_a_fixed_batch():
    cfg = TrainConfig(learning_rate=1e-2, warmup_steps=0, lr_schedule="constant")
    state, step, batch = _setup(cfg)
    losses = []
    for _ in range(60):
        state, metrics = step(state, batch)
        losses.append(float(metrics["loss"]))
    assert losses[-1] < 0.5 * losses[0]


def test_sgd_with_l2_also_learns():
    cfg = TrainConfig(optimizer="sgd", learning_rate=0.05, warmup_steps=0, lr_schedule="constant")
    state, step, batch = _setup(cfg)
    first = float(step(state, batch)[1]["loss"])
    for _ in range(60):
        state, metrics = step(state, batch)
    assert float(metrics["loss"]) < first


def test_schedule_warms_up_then_decays_to_ten_percent():
    cfg = TrainConfig(learning_rate=1.0, warmup_steps=10, lr_schedule="cosine")
    schedule = learner.make_schedule(cfg, total_steps=110)
    np.testing.assert_allclose([schedule(0), schedule(5), schedule(10)], [0.0, 0.5, 1.0], atol=1e-6)
    np.testing.assert_allclose(schedule(110), 0.1, atol=1e-6)


def test_onecycle_rises_to_the_peak_at_thirty_percent_then_falls_to_about_zero():
    cfg = TrainConfig(learning_rate=1.0, warmup_steps=10, lr_schedule="onecycle")
    schedule = learner.make_schedule(cfg, total_steps=100)
    values = np.array([schedule(i) for i in range(101)])
    np.testing.assert_allclose(values[0], 1 / 25, atol=1e-6)
    assert int(np.argmax(values)) == 30 and values[30] == pytest.approx(1.0)
    assert np.all(np.diff(values[:31]) > 0) and np.all(np.diff(values[30:]) < 0)
    assert values[100] < 1e-4


def _optax_schedule(cfg: TrainConfig, total: int):
    """The schedules as optax builds them for a Python ``int`` length."""
    if cfg.lr_schedule == "onecycle":
        return optax.cosine_onecycle_schedule(
            max(total, 1), cfg.learning_rate, pct_start=0.3, div_factor=25.0,
            final_div_factor=1e4)
    decay = optax.cosine_decay_schedule(
        cfg.learning_rate, max(total - cfg.warmup_steps, 1), alpha=0.1)
    ramp = optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps)
    return optax.join_schedules([ramp, decay], [cfg.warmup_steps])


@pytest.mark.parametrize("kind", ["cosine", "onecycle"])
def test_a_traced_run_length_gives_optax_schedules(kind):
    """The training step passes the run's length as an array (one compiled program for
    every length): the values are optax's for that length, in one compile."""
    cfg = TrainConfig(learning_rate=0.7, warmup_steps=10, lr_schedule=kind)
    traced = jax.jit(jax.vmap(lambda total, count: learner.make_schedule(cfg, total)(count),
                              in_axes=(None, 0)))
    # The longest runs too: 0.3 * total computed as total * 3 wrapped around in int32.
    for total in (1, 7, 10, 33, 110, 1000, 7777, 10**9, config.MAX_SGD_STEPS):
        counts = np.minimum(np.linspace(0, total + 5, 60), 2**31 - 1).astype(np.int32)
        reference = _optax_schedule(cfg, total)
        np.testing.assert_allclose(
            traced(np.int32(total), counts), [reference(int(c)) for c in counts],
            rtol=1e-5, atol=1e-8, err_msg=f"{kind}, {total} steps")
    assert traced._cache_size() == 1


def test_kl_adaptive_rate_shrinks_when_updates_are_too_large():
    cfg = TrainConfig(learning_rate=0.5, warmup_steps=0, lr_schedule="constant", kl_target=1e-6)
    state, step, batch = _setup(cfg)
    state, metrics = step(state, batch)
    assert float(metrics["kl"]) > 2e-6
    assert float(state.lr_scale) < 1.0
    tiny = dataclasses.replace(cfg, learning_rate=1e-9, kl_target=1.0)
    state, step, batch = _setup(tiny)
    state, _ = step(state, batch)
    assert float(state.lr_scale) > 1.0


def test_the_opponent_head_learns_the_replies_and_adds_its_weighted_loss():
    cfg = TrainConfig(learning_rate=1e-2, warmup_steps=0, lr_schedule="constant",
                      opponent_policy_weight=0.5)
    state, step, batch = _setup(cfg, opponent_head=True)
    first = None
    for _ in range(80):
        state, metrics = step(state, batch)
        first = first if first is not None else metrics
    for m in (first, metrics):  # the total is the weighted sum of the parts
        want = m["policy_loss"] + m["value_loss"] + 0.5 * m["opponent_policy_loss"]
        np.testing.assert_allclose(m["loss"], want, rtol=1e-5)
    assert float(metrics["opponent_policy_loss"]) < 0.3 * float(first["opponent_policy_loss"])
    net = network.make_network(NetworkConfig(num_blocks=1, channels=8, opponent_head=True))
    _, updates = net.apply({"params": state.params, "batch_stats": state.batch_stats},
                           batch.obs, train=True, mutable=["batch_stats", "intermediates"])
    (reply,) = updates["intermediates"]["opponent_logits"]
    # The head predicts the reply columns, which differ from the policy targets'.
    np.testing.assert_array_equal(np.argmax(reply[:5], axis=-1), [6, 0, 1, 5, 2])


def test_the_final_board_head_learns_the_final_boards_and_adds_its_weighted_loss():
    cfg = TrainConfig(learning_rate=1e-2, warmup_steps=0, lr_schedule="constant",
                      final_board_weight=0.7)
    state, step, batch = _setup(cfg, final_board_head=True)
    first = None
    for _ in range(200):
        state, metrics = step(state, batch)
        first = first if first is not None else metrics
    for m in (first, metrics):  # the total is the weighted sum of the parts
        want = m["policy_loss"] + m["value_loss"] + 0.7 * m["final_board_loss"]
        np.testing.assert_allclose(m["loss"], want, rtol=1e-5)
    assert float(metrics["final_board_loss"]) < 0.3 * float(first["final_board_loss"])
    net = network.make_network(NetworkConfig(num_blocks=1, channels=8, final_board_head=True))
    _, updates = net.apply({"params": state.params, "batch_stats": state.batch_stats},
                           batch.obs, train=True, mutable=["batch_stats", "intermediates"])
    (board,) = updates["intermediates"]["final_board_logits"]
    # The head predicts each game's own final board, cell by cell: far better than
    # calling every cell empty.
    want = np.argmax(_final_boards(), axis=-1)
    assert np.mean(np.argmax(board, axis=-1) == want) > 0.95
    assert np.mean(want == 2) < 0.82


def test_loss_weights_weigh_the_final_board_term_too():
    # Weights of 2 everywhere double every term of the loss, the final board's too.
    cfg = TrainConfig(warmup_steps=0, lr_schedule="constant", final_board_weight=0.7)
    state, step, batch = _setup(cfg, final_board_head=True)
    plain = step(state, batch)[1]
    doubled = step(state, batch.replace(weight=jnp.full((6,), 2.0)))[1]
    np.testing.assert_allclose(doubled["loss"], 2 * plain["loss"], rtol=1e-5)
    np.testing.assert_allclose(doubled["final_board_loss"], plain["final_board_loss"], rtol=1e-6)


def test_the_final_board_head_needs_final_board_targets():
    state, step, batch = _setup(TrainConfig(), final_board_head=True)
    with pytest.raises(ValueError, match="final_board"):
        step(state, batch.replace(final_board=None))


def test_the_opponent_head_needs_reply_targets():
    cfg = TrainConfig(warmup_steps=0, lr_schedule="constant")
    state, step, batch = _setup(cfg, opponent_head=True)
    with pytest.raises(ValueError, match="next_policy"):
        step(state, batch.replace(next_policy=None))


def test_loss_weights_scale_each_example_and_a_zero_weight_silences_it():
    cfg = TrainConfig(learning_rate=1e-2, warmup_steps=0, lr_schedule="constant")
    state, step, batch = _setup(cfg)
    _, plain = step(state, batch)
    _, ones = step(state, batch.replace(weight=jnp.ones(6)))
    _, twos = step(state, batch.replace(weight=jnp.full(6, 2.0)))
    np.testing.assert_allclose(ones["loss"], plain["loss"], rtol=1e-5)
    np.testing.assert_allclose(twos["loss"], 2 * plain["loss"], rtol=1e-5)
    np.testing.assert_allclose(twos["policy_loss"], plain["policy_loss"], rtol=1e-6)  # unweighted
    # With weight 0 the last example's targets move nothing.
    weight = jnp.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    other = batch.replace(policy=batch.policy.at[5].set(jax.nn.one_hot(6, 7)),
                          value=batch.value.at[5].set(-1.0))
    after_a, _ = step(state, batch.replace(weight=weight))
    after_b, _ = step(state, other.replace(weight=weight))
    leaves = lambda s: jax.tree.leaves(s.params)  # noqa: E731
    for a, b in zip(leaves(after_a), leaves(after_b), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    after_c, _ = step(state, other)  # unweighted, they do
    assert any(not np.allclose(a, c)
               for a, c in zip(leaves(after_a), leaves(after_c), strict=True))
