"""The AlphaZero policy-value network: a small residual convolutional net (Flax Linen).

Shape glossary: B batch, H = 6 rows, W = 7 columns, C channels, A = 7 actions.

The network reads ``env.observe`` planes (``[B, H, W, 2]``, mover first) and
returns policy logits over the seven columns and a value in ``[-1, 1]`` for the
player to move. Illegal moves are not masked here: the search and the loss do it.

Parameters are always float32. With ``dtype=jnp.bfloat16`` the convolutions and
dense layers compute in bfloat16 (BatchNorm statistics are reduced in float32),
and both outputs are cast back to float32.

With ``opponent_head`` the network has a second policy head that predicts the
opponent's reply (the search policy of the next position; KataGo's auxiliary
target). Its ``[B, A]`` logits are not returned: they are sown as
``intermediates['opponent_logits']``, which the loss reads by applying with
``mutable=['batch_stats', 'intermediates']``. Its parameters come after the
others (``Conv_3``, ``BatchNorm_3``, ``Dense_3``), so the inference path
(``fold_batchnorm``, the ONNX export) is the same with or without it.

With ``final_board_head`` the network also predicts the board the game will
end with: for each cell, whether it will hold the mover's stone, the
opponent's, or none (KataGo's ownership head; a dense auxiliary target for
the trunk). Its ``[B, H, W, 3]`` logits are sown as
``intermediates['final_board_logits']``; its parameters come after all the
others, so inference is the same with or without it.

With ``threat_planes`` the network adds ``env.threat_planes`` of its input to it
(``[B, H, W, 4]`` into the stem): the empty cells that would complete a line
of four for each side, Connect Four's threats. ``obs`` stays ``env.observe``'s
two planes everywhere else; ``folded_apply`` and the ONNX export compute them
too (a stem kernel with 4 input channels).

With ``global_pool`` = G > 0 every residual block pools the first G channels
of its first convolution's output over the board (their mean and maximum,
``[B, 2G]``) and adds a dense layer of them (``Dense_0`` of the block,
``[2G, C]``) to all C channels before its second convolution: KataGo's
global pooling bias, which gives each block the whole board at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

from c4jax import env
from c4jax.alphazero import conv as conv_lib
from c4jax.alphazero.config import NetworkConfig

ApplyFn = Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]

_conv_init = nn.initializers.variance_scaling(2.0, "fan_in", "truncated_normal")  # He
# The last layer of each head starts 100x smaller than LeCun's: an untrained
# network is nearly uninformative (policy ~uniform, value ~0), so the first
# searches rest on the exact game results rather than on random preferences
# (as the 0.01-scaled actor outputs of PPO implementations).
_head_init = nn.initializers.variance_scaling(1e-4, "fan_in", "truncated_normal")
FINAL_BOARD_CHANNELS = 8  # the final-board head's 1x1 convolution, before its 3 logits


def _conv(features: int, kernel_size: int, dtype: Any, loop_grads: bool) -> nn.Conv:
    return nn.Conv(
        features,
        (kernel_size, kernel_size),
        padding="SAME",
        use_bias=False,
        kernel_init=_conv_init,
        dtype=dtype,
        param_dtype=jnp.float32,
        conv_general_dilated=conv_lib.conv_general_dilated if loop_grads else None,
    )


BN_EPSILON = 1e-5  # every BatchNorm's


def _norm(train: bool, momentum: float, dtype: Any) -> nn.BatchNorm:
    return nn.BatchNorm(
        use_running_average=not train,
        momentum=momentum,
        epsilon=BN_EPSILON,
        dtype=dtype,
        param_dtype=jnp.float32,
    )


def with_threats(obs: jax.Array) -> jax.Array:
    """[B, H, W, 2] ``env.observe`` planes -> [B, H, W, 4] float32: the stones, then
    ``env.threat_planes`` (the mover's threats, the opponent's)."""
    obs = obs.astype(jnp.float32)
    return jnp.concatenate([obs, env.threat_planes(obs)], axis=-1)


def pool_features(y: jax.Array, channels: int) -> jax.Array:
    """[B, H, W, C] -> [B, 2G]: the mean, then the maximum, over the board of the
    first G = ``channels`` channels (the global pooling bias's input)."""
    g = y[..., :channels]
    return jnp.concatenate([jnp.mean(g, axis=(1, 2)), jnp.max(g, axis=(1, 2))], axis=-1)


class ResidualBlock(nn.Module):
    """conv-BN-relu-conv-BN, plus the input, then relu; keeps ``[B, H, W, C]``.

    With ``global_pool`` = G > 0, a dense layer of ``pool_features`` of the first
    G channels after the first conv-BN-relu adds a bias ``[B, C]`` to every
    position before the second convolution.
    """

    channels: int
    kernel_size: int
    dtype: Any = jnp.float32
    bn_momentum: float = 0.9
    loop_grads: bool = False
    global_pool: int = 0

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        c, k, m, dt = self.channels, self.kernel_size, self.bn_momentum, self.dtype
        y = nn.relu(_norm(train, m, dt)(_conv(c, k, dt, self.loop_grads)(x)))
        if self.global_pool:
            bias = nn.Dense(c, dtype=dt, param_dtype=jnp.float32)(
                pool_features(y, self.global_pool))  # [B, C]
            y = y + bias[:, None, None, :]
        y = _norm(train, m, dt)(_conv(c, k, dt, self.loop_grads)(y))
        return nn.relu(x + y)


class PolicyValueNet(nn.Module):
    """AlphaZero ResNet: stem, ``num_blocks`` residual blocks, policy and value heads.

    Attributes:
        num_blocks: residual blocks after the stem.
        channels: convolution channels in the stem and every block.
        kernel_size: side of the square kernels of the stem and blocks.
        dtype: compute dtype (parameters are float32, outputs float32).
        policy_channels: 1x1 convolution channels of the policy head.
        value_channels: 1x1 convolution channels of the value head.
        value_hidden: width of the value head's hidden dense layer.
        bn_momentum: decay of the BatchNorm running statistics.
        opponent_head: add the opponent-reply policy head (module doc).
        final_board_head: add the final-board head (module doc).
        global_pool: channels of each block's global pooling bias, 0 = none
            (module doc).
        threat_planes: add ``env.threat_planes`` to the input (module doc).
        loop_grads: take the convolutions' gradients as forward-layout
            convolutions (``c4jax.alphazero.conv``), which XLA:CPU runs fast
            inside a ``while`` loop; the same values, parameters and outputs.
    """

    num_blocks: int
    channels: int
    kernel_size: int
    dtype: Any = jnp.float32
    policy_channels: int = 2
    value_channels: int = 1
    value_hidden: int = 256
    bn_momentum: float = 0.9
    opponent_head: bool = False
    final_board_head: bool = False
    loop_grads: bool = False
    global_pool: int = 0
    threat_planes: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array, train: bool = False) -> tuple[jax.Array, jax.Array]:
        """Evaluates positions.

        Args:
            obs: [B, H, W, 2] float32 planes from ``env.observe``.
            train: use batch statistics in BatchNorm and update the running ones
                (call ``apply`` with ``mutable=['batch_stats']``); otherwise use
                the running statistics.

        Returns:
            ``(logits, value)``: [B, A] float32 policy logits (unmasked) and [B]
            float32 value in [-1, 1] for the player to move.
        """
        conv = lambda features, k: _conv(features, k, self.dtype, self.loop_grads)  # noqa: E731
        norm = lambda: _norm(train, self.bn_momentum, self.dtype)  # noqa: E731
        dense = lambda features, init=nn.linear.default_kernel_init: nn.Dense(  # noqa: E731
            features, kernel_init=init, dtype=self.dtype, param_dtype=jnp.float32
        )

        x = (with_threats(obs) if self.threat_planes else obs).astype(self.dtype)
        x = nn.relu(norm()(conv(self.channels, self.kernel_size)(x)))
        for _ in range(self.num_blocks):
            x = ResidualBlock(self.channels, self.kernel_size, self.dtype, self.bn_momentum,
                              self.loop_grads, self.global_pool)(x, train)

        p = nn.relu(norm()(conv(self.policy_channels, 1)(x)))
        logits = dense(env.NUM_ACTIONS, _head_init)(p.reshape(p.shape[0], -1))

        v = nn.relu(norm()(conv(self.value_channels, 1)(x)))
        v = nn.relu(dense(self.value_hidden)(v.reshape(v.shape[0], -1)))
        v = dense(1, _head_init)(v)
        value = jnp.tanh(v[:, 0].astype(jnp.float32))

        if self.opponent_head:  # [B, A], sown (module doc); dead code in inference
            o = nn.relu(norm()(conv(self.policy_channels, 1)(x)))
            reply = dense(env.NUM_ACTIONS, _head_init)(o.reshape(o.shape[0], -1))
            self.sow("intermediates", "opponent_logits", reply.astype(jnp.float32))
        if self.final_board_head:  # [B, H, W, 3], sown (module doc)
            f = nn.relu(norm()(conv(FINAL_BOARD_CHANNELS, 1)(x)))
            final = nn.Conv(3, (1, 1), kernel_init=_head_init, dtype=self.dtype,
                            param_dtype=jnp.float32)(f)
            self.sow("intermediates", "final_board_logits", final.astype(jnp.float32))
        return logits.astype(jnp.float32), value


def make_network(config: NetworkConfig, *, loop_grads: bool = False) -> PolicyValueNet:
    """The network described by ``config`` (bfloat16 compute if ``config.bfloat16``).

    ``loop_grads``: see ``PolicyValueNet``; the trainer turns it on on the CPU.
    """
    return PolicyValueNet(
        num_blocks=config.num_blocks,
        channels=config.channels,
        kernel_size=config.kernel_size,
        value_channels=config.value_channels,
        dtype=jnp.bfloat16 if config.bfloat16 else jnp.float32,
        opponent_head=config.opponent_head,
        final_board_head=config.final_board_head,
        loop_grads=loop_grads,
        global_pool=config.global_pool,
        threat_planes=config.threat_planes,
    )


def init_variables(network: PolicyValueNet, key: jax.Array) -> dict:
    """Fresh variables ``{'params': ..., 'batch_stats': ...}`` (float32).

    Args:
        network: the module to initialise.
        key: PRNG key, consumed.
    """
    obs = jnp.zeros((1, env.NUM_ROWS, env.NUM_COLS, 2), jnp.float32)
    variables = network.init(key, obs, train=False)
    return {"params": variables["params"], "batch_stats": variables["batch_stats"]}


def fold_conv_bn(kernel, scale, bias, mean, var, epsilon: float = BN_EPSILON):
    """A bias-free convolution followed by inference BatchNorm, as one biased convolution.

    ``bn(conv(x, k)) = conv(x, k * s) + (bias - mean * s)`` with
    ``s = scale / sqrt(var + epsilon)``. Written with arithmetic operators only, so
    it takes NumPy arrays (any precision, as the ONNX export does in float64) or
    JAX arrays (traceable).

    Args:
        kernel: [kh, kw, C_in, C_out] Flax HWIO kernel.
        scale, bias: [C_out] BatchNorm parameters.
        mean, var: [C_out] BatchNorm running statistics.

    Returns:
        ``(kernel, bias)``: [kh, kw, C_in, C_out] and [C_out].
    """
    s = scale / (var + epsilon) ** 0.5
    return kernel * s, bias - mean * s


def fold_batchnorm(variables: Any) -> dict:
    """Inference variables with every BatchNorm folded into the convolution before it.

    Args:
        variables: ``{'params', 'batch_stats'}`` of a ``PolicyValueNet`` (float32).

    Returns:
        ``{'stem': conv, 'blocks': [(conv, conv), ...], 'policy': conv,
        'policy_dense': dense, 'value': conv, 'value_hidden': dense,
        'value_out': dense}`` where a conv is ``(kernel [k, k, C_in, C_out],
        bias [C_out])`` and a dense ``(kernel [F_in, F_out], bias [F_out])``;
        with global pooling also ``'block_pools': [dense, ...]``, one
        ``[2G, C]`` dense a block. ``folded_apply`` evaluates it.
    """
    params, stats = variables["params"], variables["batch_stats"]

    def conv(p: Any, s: Any, i: int) -> tuple[jax.Array, jax.Array]:
        bn, st = p[f"BatchNorm_{i}"], s[f"BatchNorm_{i}"]
        kernel = p[f"Conv_{i}"]["kernel"]
        return fold_conv_bn(kernel, bn["scale"], bn["bias"], st["mean"], st["var"])

    def dense(p: Any) -> tuple[jax.Array, jax.Array]:
        return p["kernel"], p["bias"]

    blocks = sorted((k for k in params if k.startswith("ResidualBlock_")),
                    key=lambda k: int(k.rsplit("_", 1)[1]))
    pools = {}
    if blocks and "Dense_0" in params[blocks[0]]:  # global pooling (module doc)
        pools = {"block_pools": [dense(params[b]["Dense_0"]) for b in blocks]}
    return {
        **pools,
        "stem": conv(params, stats, 0),
        "blocks": [(conv(params[b], stats[b], 0), conv(params[b], stats[b], 1)) for b in blocks],
        "policy": conv(params, stats, 1),
        "policy_dense": dense(params["Dense_0"]),
        "value": conv(params, stats, 2),
        "value_hidden": dense(params["Dense_1"]),
        "value_out": dense(params["Dense_2"]),
    }


def folded_apply(folded: dict, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``PolicyValueNet`` in inference mode on ``fold_batchnorm``'s variables (float32).

    Args:
        folded: ``fold_batchnorm(variables)``.
        obs: [B, H, W, 2] float32 planes from ``env.observe``.

    Returns:
        ``(logits, value)``: [B, A] float32 (unmasked) and [B] float32 in [-1, 1],
        equal to ``network.apply(variables, obs)`` up to float32 rounding.
    """

    def conv(x: jax.Array, kb: tuple[jax.Array, jax.Array]) -> jax.Array:
        kernel, bias = kb
        y = jax.lax.conv_general_dilated(
            x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return y + bias

    def dense(x: jax.Array, kb: tuple[jax.Array, jax.Array]) -> jax.Array:
        return x @ kb[0] + kb[1]

    obs = obs.astype(jnp.float32)
    if folded["stem"][0].shape[2] == 4:  # a network with threat planes (module doc)
        obs = with_threats(obs)
    x = nn.relu(conv(obs, folded["stem"]))
    pools = folded.get("block_pools") or [None] * len(folded["blocks"])
    for (first, second), pool in zip(folded["blocks"], pools, strict=True):
        y = nn.relu(conv(x, first))
        if pool is not None:  # [2G, C] kernel: pool G channels
            y = y + dense(pool_features(y, pool[0].shape[0] // 2), pool)[:, None, None, :]
        x = nn.relu(x + conv(y, second))
    p = nn.relu(conv(x, folded["policy"]))
    logits = dense(p.reshape(p.shape[0], -1), folded["policy_dense"])
    v = nn.relu(conv(x, folded["value"]))
    v = nn.relu(dense(v.reshape(v.shape[0], -1), folded["value_hidden"]))
    value = jnp.tanh(dense(v, folded["value_out"])[:, 0])
    return logits, value


@functools.lru_cache(maxsize=16)
def make_apply_fn(network: PolicyValueNet) -> ApplyFn:
    """Inference-mode evaluation: ``apply_fn(variables, obs) -> (logits, value)``.

    The returned function uses the BatchNorm running statistics and mutates
    nothing; ``obs`` is [B, H, W, 2], ``logits`` [B, A] float32, ``value`` [B]
    float32 in [-1, 1]. It is pure and traceable (jit it, or call it under jit).
    A float32 network runs with its BatchNorms folded into the convolutions
    (``fold_batchnorm``: the same function up to float32 rounding, one
    convolution and a bias per layer instead of a convolution and a normalisation);
    a bfloat16 one runs the module itself.

    Equal modules get the same function (cached), so that what is traced and
    compiled for one (a search, a match: ``search.make_alphazero_act``) serves
    the next network of the same shape in this process.
    """
    if network.dtype != jnp.float32:

        def apply_fn(variables: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
            return network.apply(variables, obs, train=False)

        return apply_fn

    def folded_apply_fn(variables: Any, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        return folded_apply(fold_batchnorm(variables), obs)

    return folded_apply_fn
