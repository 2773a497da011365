"""Behaviour of the policy-value ResNet: shapes, dtypes, BatchNorm modes, bfloat16.

Compilation dominates the run time on CPU, so the tests share one small network,
one jitted apply function and few distinct batch shapes.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import env
from c4jax.alphazero import network
from c4jax.alphazero.config import NetworkConfig

SMALL = NetworkConfig(num_blocks=2, channels=16, kernel_size=3)
BATCH = 16


def _random_obs(seed, batch_size=BATCH):
    """[B, 6, 7, 2] float32 planes of random (not necessarily reachable) boards."""
    cells = np.random.default_rng(seed).integers(0, 3, (batch_size, env.NUM_ROWS, env.NUM_COLS))
    return jnp.asarray(np.stack([cells == 1, cells == 2], axis=-1), jnp.float32)


@pytest.fixture(scope="module")
def small():
    """(network, variables, jitted inference apply_fn) of an untrained small net."""
    net = network.make_network(SMALL)
    variables = network.init_variables(net, jax.random.key(0))
    return net, variables, jax.jit(network.make_apply_fn(net))


@pytest.fixture(scope="module")
def train_apply(small):
    """Jitted training-mode apply: (variables, obs) -> ((logits, value), updates)."""
    net = small[0]
    return jax.jit(lambda v, obs: net.apply(v, obs, train=True, mutable=["batch_stats"]))


def test_init_variables(small):
    _, variables, _ = small
    assert set(variables) == {"params", "batch_stats"}
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(variables))
    # Fresh running statistics: mean 0, variance 1.
    means = [
        x for p, x in jax.tree.leaves_with_path(variables) if "mean" in jax.tree_util.keystr(p)
    ]
    assert means and all(np.all(m == 0) for m in means)


@pytest.mark.parametrize("batch_size", [1, BATCH])
def test_shapes_and_dtypes(small, batch_size):
    _, variables, apply_fn = small
    logits, value = apply_fn(variables, _random_obs(0, batch_size))
    assert logits.shape == (batch_size, env.NUM_ACTIONS) and logits.dtype == jnp.float32
    assert value.shape == (batch_size,) and value.dtype == jnp.float32
    assert np.all(np.isfinite(logits)) and np.all(np.isfinite(value))


def test_other_kernel_size_and_depth():
    # Shapes only: abstract evaluation compiles nothing.
    config = NetworkConfig(num_blocks=1, channels=8, kernel_size=5)
    net = network.make_network(config)
    variables = jax.eval_shape(lambda: network.init_variables(net, jax.random.key(1)))
    kernels = [x for x in jax.tree.leaves(variables["params"]) if x.ndim == 4]
    assert {k.shape[:2] for k in kernels} == {(5, 5), (1, 1)}
    logits, value = jax.eval_shape(network.make_apply_fn(net), variables, _random_obs(1, 3))
    assert logits.shape == (3, env.NUM_ACTIONS) and value.shape == (3,)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32


def test_real_observations(small):
    _, variables, apply_fn = small
    states = [env.init(), env.from_moves("4453"), env.from_moves("444444")]
    states += [env.from_moves("")] * (BATCH - len(states))
    logits, value = apply_fn(variables, env.observe(env.stack(states)))
    assert logits.shape == (BATCH, 7) and value.shape == (BATCH,)
    assert np.all(np.isfinite(logits)) and np.all(np.abs(value) <= 1)
    assert not np.allclose(logits[0], logits[1])  # the board matters


def test_value_in_range(small):
    _, variables, apply_fn = small
    # Scale the parameters up so that the value head saturates if it can.
    loud = {
        "params": jax.tree.map(lambda p: 10.0 * p, variables["params"]),
        "batch_stats": variables["batch_stats"],
    }
    for v in (variables, loud):
        _, value = apply_fn(v, 5.0 * _random_obs(3))
        assert np.all(np.abs(value) <= 1.0) and np.all(np.isfinite(value))
    assert np.max(np.abs(value)) > 0.9  # it does saturate, within [-1, 1]


def test_train_mode_uses_and_updates_batch_statistics(small, train_apply):
    _, variables, apply_fn = small
    obs = _random_obs(4)
    (logits, value), updates = train_apply(variables, obs)
    assert logits.shape == (BATCH, 7) and value.shape == (BATCH,)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32
    assert set(updates) == {"batch_stats"}
    old = jax.tree.leaves(variables["batch_stats"])
    new = jax.tree.leaves(updates["batch_stats"])
    assert len(old) == len(new)
    assert any(not np.allclose(a, b) for a, b in zip(old, new, strict=True))

    # Inference uses the running statistics (fresh ones here: mean 0, var 1),
    # which give other outputs than the batch statistics.
    infer_logits, _ = apply_fn(variables, obs)
    assert not np.allclose(infer_logits, logits, atol=1e-3)


def test_inference_is_per_example_and_train_mode_is_not(small, train_apply):
    _, variables, apply_fn = small
    # Give the running statistics realistic values with one training-mode pass.
    obs = _random_obs(5)
    _, updates = train_apply(variables, obs)
    variables = {"params": variables["params"], "batch_stats": updates["batch_stats"]}

    batch_logits, batch_value = apply_fn(variables, obs)
    other = obs.at[1:].set(_random_obs(6)[1:])  # same first row, other neighbours
    other_logits, other_value = apply_fn(variables, other)
    np.testing.assert_allclose(other_logits[0], batch_logits[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(other_value[0], batch_value[0], rtol=1e-4, atol=1e-5)

    (train_logits, _), _ = train_apply(variables, obs)
    (train_other, _), _ = train_apply(variables, other)
    assert not np.allclose(train_logits[0], train_other[0], atol=1e-4)


def test_bfloat16_computes_in_bfloat16_and_returns_float32(small, train_apply):
    net32, variables, apply32 = small
    net16 = network.make_network(dataclasses.replace(SMALL, bfloat16=True))
    assert net16.dtype == jnp.bfloat16
    # Parameters stay float32: the bfloat16 network has the very same variables.
    abstract16 = jax.eval_shape(lambda: network.init_variables(net16, jax.random.key(7)))
    assert jax.tree.structure(abstract16) == jax.tree.structure(variables)
    for a, b in zip(jax.tree.leaves(abstract16), jax.tree.leaves(variables), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype == jnp.float32

    obs = _random_obs(8)
    logits, value = jax.jit(network.make_apply_fn(net16))(variables, obs)
    assert logits.dtype == jnp.float32 and value.dtype == jnp.float32
    assert logits.shape == (BATCH, 7) and value.shape == (BATCH,)
    assert np.all(np.abs(value) <= 1.0)

    # The same parameters in float32: close, but not bit-identical.
    logits32, value32 = apply32(variables, obs)
    np.testing.assert_allclose(logits, logits32, atol=0.15, rtol=0.1)
    np.testing.assert_allclose(value, value32, atol=0.1)
    assert not np.array_equal(logits, logits32)

    train16 = jax.jit(lambda v, x: net16.apply(v, x, train=True, mutable=["batch_stats"]))
    (_, value_train), updates = train16(variables, obs)
    assert value_train.dtype == jnp.float32
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(updates))


def test_make_network_reads_the_config():
    config = NetworkConfig(num_blocks=3, channels=24, kernel_size=5, value_channels=4)
    net = network.make_network(config)
    assert (net.num_blocks, net.channels, net.kernel_size, net.value_channels) == (3, 24, 5, 4)
    assert net.dtype == jnp.float32


def _perturbed(variables, seed):
    """Variables moved off their initial values, so that BatchNorm's statistics and
    the heads matter: running means, BatchNorm scales and biases shifted, running
    variances drawn from [0.2, 3], the heads' near-zero last layers made larger."""
    leaves, tree = jax.tree.flatten_with_path(variables)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    out = []
    for (path, x), key in zip(leaves, keys, strict=True):
        name = jax.tree_util.keystr(path)
        noise = jax.random.normal(key, x.shape)
        if "var" in name:
            out.append(jax.random.uniform(key, x.shape, minval=0.2, maxval=3.0))
        elif ("ResidualBlock" not in name  # a block's Dense_0 is its global pooling's
              and any(f"Dense_{i}" in name for i in (0, 2, 3))):  # the heads' last layers start ~0
            out.append(x * 300.0 + (0.01 * noise if "bias" in name else 0.0))
        elif "BatchNorm" in name or "mean" in name:
            out.append(x + 0.3 * noise)
        else:
            out.append(x)
    return jax.tree.unflatten(tree, out)


def test_fold_conv_bn_is_the_batchnorm_of_the_convolution():
    # One input channel, a 1x1 kernel: conv(x) = 2 x; BatchNorm with mean 1, var 4,
    # scale 3, bias 0.5 gives 3 (2x - 1) / sqrt(4 + eps) + 0.5.
    kernel, bias = network.fold_conv_bn(
        np.full((1, 1, 1, 1), 2.0), np.array([3.0]), np.array([0.5]), np.array([1.0]),
        np.array([4.0]), epsilon=0.0,
    )
    np.testing.assert_allclose(kernel.ravel(), [3.0])  # 2 * 3 / 2
    np.testing.assert_allclose(bias, [-1.0])  # 0.5 - 1 * 3 / 2
    x = 5.0
    np.testing.assert_allclose(kernel.ravel()[0] * x + bias[0], 3 * (2 * x - 1) / 2 + 0.5)


def _assert_folded_equals_module(net, variables, obs):
    """The folded inference path gives the module's outputs; returns its logits."""
    want_logits, want_value = jax.jit(lambda v, x: net.apply(v, x, train=False))(variables, obs)
    logits, value = jax.jit(network.make_apply_fn(net))(variables, obs)
    # The outputs are far from trivial, so agreeing means the same function.
    assert float(jnp.std(want_logits)) > 0.1 and float(jnp.std(want_value)) > 0.02
    np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value, want_value, rtol=1e-4, atol=1e-4)
    return want_logits


@pytest.mark.parametrize("kernel_size, value_channels", [(3, 1), (5, 1), (3, 4)])
def test_folded_inference_equals_the_module(kernel_size, value_channels):
    config = NetworkConfig(
        num_blocks=2, channels=8, kernel_size=kernel_size, value_channels=value_channels
    )
    net = network.make_network(config)
    variables = _perturbed(network.init_variables(net, jax.random.key(1)), seed=2)
    _assert_folded_equals_module(net, variables, _random_obs(3))
    # The folded variables hold no BatchNorm: a conv and a bias per layer.
    folded = network.fold_batchnorm(variables)
    assert len(folded["blocks"]) == 2
    kernel, bias = folded["stem"]
    assert kernel.shape == (kernel_size, kernel_size, 2, 8) and bias.shape == (8,)
    assert folded["value"][0].shape == (1, 1, 8, value_channels)
    assert folded["value_hidden"][0].shape == (6 * 7 * value_channels, 256)


def test_the_opponent_head_adds_a_sown_policy_and_leaves_inference_alone():
    plain = network.make_network(NetworkConfig(num_blocks=1, channels=8))
    headed = network.make_network(NetworkConfig(num_blocks=1, channels=8, opponent_head=True))
    variables = _perturbed(network.init_variables(headed, jax.random.key(4)), seed=5)
    base = network.init_variables(plain, jax.random.key(4))
    extra = set(variables["params"]) - set(base["params"])
    assert extra == {"Conv_3", "BatchNorm_3", "Dense_3"}  # after the others' names
    obs = _random_obs(6)
    (logits, value), updates = jax.jit(
        lambda v, x: headed.apply(v, x, train=True, mutable=["batch_stats", "intermediates"])
    )(variables, obs)
    (reply,) = updates["intermediates"]["opponent_logits"]
    assert reply.shape == (BATCH, env.NUM_ACTIONS) and reply.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(reply - logits))) > 1e-3  # its own head, not a copy
    # Inference ignores the head: the module without it, and the folded path, agree.
    without = {"params": {k: v for k, v in variables["params"].items() if k not in extra},
               "batch_stats": {k: v for k, v in variables["batch_stats"].items()
                               if k not in extra}}
    want = jax.jit(lambda v, x: plain.apply(v, x, train=False))(without, obs)
    got = jax.jit(lambda v, x: headed.apply(v, x, train=False))(variables, obs)
    folded = jax.jit(network.make_apply_fn(headed))(variables, obs)
    for outputs in (got, folded):
        np.testing.assert_allclose(outputs[0], want[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(outputs[1], want[1], rtol=1e-4, atol=1e-4)


def test_the_final_board_head_adds_sown_cell_logits_and_leaves_inference_alone():
    plain = network.make_network(NetworkConfig(num_blocks=1, channels=8))
    both = NetworkConfig(num_blocks=1, channels=8, opponent_head=True, final_board_head=True)
    for cfg, names in ((NetworkConfig(num_blocks=1, channels=8, final_board_head=True),
                        {"Conv_3", "BatchNorm_3", "Conv_4"}),
                       (both, {"Conv_3", "BatchNorm_3", "Dense_3", "Conv_4", "BatchNorm_4",
                               "Conv_5"})):
        headed = network.make_network(cfg)
        variables = _perturbed(network.init_variables(headed, jax.random.key(4)), seed=5)
        base = network.init_variables(plain, jax.random.key(4))
        extra = set(variables["params"]) - set(base["params"])
        assert extra == names  # after the others' names
        obs = _random_obs(6)
        _, updates = jax.jit(lambda v, x, headed=headed: headed.apply(
            v, x, train=True, mutable=["batch_stats", "intermediates"]))(variables, obs)
        (board,) = updates["intermediates"]["final_board_logits"]
        assert board.shape == (BATCH, env.NUM_ROWS, env.NUM_COLS, 3)
        assert board.dtype == jnp.float32
        without = {"params": {k: v for k, v in variables["params"].items() if k not in extra},
                   "batch_stats": {k: v for k, v in variables["batch_stats"].items()
                                   if k not in extra}}
        want = jax.jit(lambda v, x: plain.apply(v, x, train=False))(without, obs)
        got = jax.jit(lambda v, x, headed=headed: headed.apply(v, x, train=False))(
            variables, obs)
        folded = jax.jit(network.make_apply_fn(headed))(variables, obs)
        for outputs in (got, folded):
            np.testing.assert_allclose(outputs[0], want[0], rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(outputs[1], want[1], rtol=1e-4, atol=1e-4)


def test_global_pooling_lets_one_block_see_the_whole_board():
    """With 1x1 convolutions a plain block is per-cell; with global pooling a stone
    in one corner changes the block's output in the other."""
    for pool, reaches in ((0, False), (4, True)):
        block = network.ResidualBlock(channels=8, kernel_size=1, global_pool=pool)
        x = jnp.zeros((1, env.NUM_ROWS, env.NUM_COLS, 8)).at[:, :, :, 0].set(0.5)
        variables = _perturbed(block.init(jax.random.key(7), x), seed=8)
        if pool:
            assert variables["params"]["Dense_0"]["kernel"].shape == (2 * pool, 8)
        moved = x.at[0, 0, 0, :].set(3.0)  # the top-left cell only
        before, after = (block.apply(variables, y)[0, -1, -1] for y in (x, moved))  # bottom right
        changed = float(jnp.max(jnp.abs(after - before)))
        assert (changed > 1e-3) == reaches, (pool, changed)


def test_folded_inference_with_global_pooling_equals_the_module():
    config = NetworkConfig(num_blocks=2, channels=8, global_pool=3)
    net = network.make_network(config)
    variables = _perturbed(network.init_variables(net, jax.random.key(3)), seed=4)
    assert {k for k in variables["params"]["ResidualBlock_1"]} == {
        "Conv_0", "BatchNorm_0", "Dense_0", "Conv_1", "BatchNorm_1"}
    obs = _random_obs(3)
    want_logits = _assert_folded_equals_module(net, variables, obs)
    folded = network.fold_batchnorm(variables)
    assert [p[0].shape for p in folded["block_pools"]] == [(6, 8), (6, 8)]
    # Without the pooling bias the network computes something else.
    del folded["block_pools"]
    other, _ = jax.jit(network.folded_apply)(folded, obs)
    assert float(jnp.max(jnp.abs(other - want_logits))) > 1e-3


def test_threat_planes_feed_the_stem_and_folded_inference_computes_them():
    config = NetworkConfig(num_blocks=2, channels=8, threat_planes=True)
    net = network.make_network(config)
    assert net.threat_planes
    variables = _perturbed(network.init_variables(net, jax.random.key(3)), seed=4)
    assert variables["params"]["Conv_0"]["kernel"].shape == (3, 3, 4, 8)
    # Positions with threats: a stone away from completing a line of four.
    obs = env.observe(env.stack([env.from_moves(m) for m in
                                 ("112233", "1121411", "4455", "", "3344553")]))
    obs = jnp.concatenate([obs, _random_obs(5, batch_size=11)])
    assert float(env.threat_planes(obs).sum()) > 5
    _assert_folded_equals_module(net, variables, obs)
    # The stem reads the threats: with its weights on them zeroed the output changes.
    params = dict(variables["params"])
    kernel = params["Conv_0"]["kernel"]
    params["Conv_0"] = {"kernel": kernel.at[:, :, 2:].set(0.0)}
    blind, _ = net.apply({**variables, "params": params}, obs)
    want, _ = net.apply(variables, obs)
    assert float(jnp.max(jnp.abs(blind - want))) > 1e-3


def test_with_threats_appends_the_threat_planes():
    obs = env.observe(env.from_moves("112233"))[None]
    planes = network.with_threats(obs)
    assert planes.shape == (1, env.NUM_ROWS, env.NUM_COLS, 4) and planes.dtype == jnp.float32
    np.testing.assert_array_equal(planes[..., :2], obs)
    np.testing.assert_array_equal(planes[..., 2:], env.threat_planes(obs))
