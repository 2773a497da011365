"""The convolution with hand-written gradients: the same values and gradients as
``lax.conv_general_dilated``'s, anything it does not cover handed to lax, and the
network with it the same network."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from c4jax import env
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import conv, network

NHWC = conv.DIMENSION_NUMBERS


def _lax_conv(padding):
    return lambda x, w: lax.conv_general_dilated(x, w, (1, 1), padding,
                                                 dimension_numbers=NHWC)


def _ours(padding):
    return lambda x, w: conv.conv_general_dilated(x, w, (1, 1), padding,
                                                  dimension_numbers=NHWC)


def _value_and_grads(f, x, w, g):
    y, vjp = jax.vjp(f, x, w)
    return (y, *vjp(g))


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "padding"),
    [
        ((4, 6, 7, 5), (3, 3, 5, 8), "SAME"),  # the network's blocks
        ((3, 6, 7, 8), (1, 1, 8, 2), "SAME"),  # its heads
        ((2, 6, 7, 3), (4, 2, 3, 4), "SAME"),  # even sides: uneven padding (1, 2), (0, 1)
        ((2, 5, 6, 3), (3, 3, 3, 2), "VALID"),
        ((2, 5, 6, 3), (3, 3, 3, 2), ((2, 0), (0, 1))),
    ],
)
def test_value_and_gradients_are_lax_s(x_shape, w_shape, padding):
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, x_shape)
    w = jax.random.normal(kw, w_shape)
    y_ref = _lax_conv(padding)(x, w)
    g = jax.random.normal(kg, y_ref.shape)
    ref = _value_and_grads(_lax_conv(padding), x, w, g)
    got = _value_and_grads(jax.jit(_ours(padding)), x, w, g)
    for name, a, b in zip(("value", "input gradient", "weight gradient"), got, ref, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        scale = float(jnp.max(jnp.abs(b)))
        np.testing.assert_allclose(a, b, atol=1e-5 * scale, rtol=0, err_msg=name)


def test_a_weight_gradient_checked_by_hand():
    """One input pixel and one output pixel: the gradient of a 3x3 kernel is the
    input's value at the tap that links them, zero elsewhere."""
    x = jnp.zeros((1, 3, 3, 1)).at[0, 0, 0, 0].set(2.0)  # top-left corner
    w = jnp.zeros((3, 3, 1, 1))

    def out_centre(w):
        return conv.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)[0, 1, 1, 0]

    dw = jax.grad(out_centre)(w)[:, :, 0, 0]
    expected = np.zeros((3, 3))
    expected[0, 0] = 2.0  # the centre output reads the corner through the kernel's corner
    np.testing.assert_array_equal(dw, expected)


def test_bfloat16_keeps_its_dtype_and_stays_close():
    kx, kw = jax.random.split(jax.random.key(1))
    x = jax.random.normal(kx, (4, 6, 7, 8)).astype(jnp.bfloat16)
    w = jax.random.normal(kw, (3, 3, 8, 8)).astype(jnp.bfloat16)
    loss = lambda f: lambda x, w: jnp.sum(f(x, w).astype(jnp.float32) ** 2)  # noqa: E731
    gx, gw = jax.grad(loss(_ours("SAME")), argnums=(0, 1))(x, w)
    rx, rw = jax.grad(loss(_lax_conv("SAME")), argnums=(0, 1))(x, w)
    assert gx.dtype == gw.dtype == jnp.bfloat16
    for a, b in ((gx, rx), (gw, rw)):
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        assert np.max(np.abs(a - b)) <= 0.03 * np.max(np.abs(b))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_strides": (2, 2)},
        {"rhs_dilation": (2, 2)},
        {"dimension_numbers": ("NCHW", "OIHW", "NCHW")},
        {"padding": ((3, 3), (0, 0))},  # more padding than the kernel spans
    ],
)
def test_what_it_does_not_cover_is_lax_s_own(kwargs, monkeypatch):
    args = {"window_strides": (1, 1), "padding": "SAME", "dimension_numbers": NHWC, **kwargs}
    x = jax.random.normal(jax.random.key(2), (2, 6, 7, 3))
    w = jax.random.normal(jax.random.key(3), (3, 3, 3, 3))
    if args["dimension_numbers"][0] == "NCHW":
        x, w = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)
    expected = lax.conv_general_dilated(x, w, **args)
    monkeypatch.setattr(conv, "conv2d", lambda *a: pytest.fail("took the hand-written path"))
    np.testing.assert_array_equal(conv.conv_general_dilated(x, w, **args), expected)


def test_inside_a_loop_it_trains_as_lax_does():
    """Gradient descent in a lax.fori_loop (where XLA:CPU is slow on lax's own
    convolution gradients) lands on the same kernels with either."""
    kx, kw = jax.random.split(jax.random.key(4))
    x = jax.random.normal(kx, (8, 6, 7, 4))
    w0 = 0.3 * jax.random.normal(kw, (3, 3, 4, 4))

    def loss(f, w):
        return jnp.mean((f(jax.nn.relu(f(x, w)), w) - x) ** 2)

    def descend(f):
        step = lambda _, w: w - 0.05 * jax.grad(lambda w: loss(f, w))(w)  # noqa: E731
        return jax.jit(lambda w: jax.lax.fori_loop(0, 5, step, w))(w0)

    ours, ref = descend(_ours("SAME")), descend(_lax_conv("SAME"))
    assert loss(_lax_conv("SAME"), ours) < 0.99 * loss(_lax_conv("SAME"), w0)  # it learned
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=1e-5)


def test_the_network_is_the_same_network_with_it():
    cfg = config_lib.load("tiny").network
    plain = network.make_network(cfg)
    loopy = network.make_network(cfg, loop_grads=True)
    variables = network.init_variables(plain, jax.random.key(5))
    assert jax.tree.structure(network.init_variables(loopy, jax.random.key(5))) \
        == jax.tree.structure(variables)
    obs = jax.random.bernoulli(jax.random.key(6), 0.3,
                               (16, env.NUM_ROWS, env.NUM_COLS, 2)).astype(jnp.float32)

    def loss(net, params):
        (logits, value), _ = net.apply({**variables, "params": params}, obs, train=True,
                                       mutable=["batch_stats"])
        return jnp.mean(logits ** 2) + jnp.mean(value)

    for train in (False, True):
        out = [net.apply(variables, obs, train=train, mutable=["batch_stats"])[0]
               for net in (plain, loopy)]
        np.testing.assert_array_equal(out[0][0], out[1][0])  # the same forward program
        np.testing.assert_array_equal(out[0][1], out[1][1])
    g_plain = jax.grad(lambda p: loss(plain, p))(variables["params"])
    g_loopy = jax.grad(lambda p: loss(loopy, p))(variables["params"])
    for a, b in zip(jax.tree.leaves(g_loopy), jax.tree.leaves(g_plain), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6 + 1e-4 * float(jnp.max(jnp.abs(b))), rtol=0)
