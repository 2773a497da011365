"""A 2-D convolution whose gradients are forward-layout convolutions.

Shape glossary: B batch, H, W input rows and columns, H', W' output rows and
columns, kh, kw kernel rows and columns, Ci input channels, Co output channels.

XLA:CPU runs JAX's convolution gradients slowly inside a ``while`` loop: the
weight gradient is a convolution whose batch and feature dimensions trade
places, and in a loop body XLA:CPU computes it with a generic loop nest rather
than its fast convolution (jax-ml/jax#12868). Measured on a 2-core AMD EPYC
(Zen 4), jax 0.10.2: six 3x3 convolutions, C = 32, B = 256, forward and
backward, 1047 ms a step inside ``lax.fori_loop`` against 43 ms written out
step by step; with :func:`conv2d` 50 ms inside the loop.

:func:`conv2d` computes the same value with ``lax.conv_general_dilated`` and
defines its gradients by hand, both as ordinary ``NHWC``/``HWIO`` convolutions:

* the input gradient: the output gradient convolved with the kernel flipped in
  space and with its channels swapped;
* the weight gradient: the input, with its channels as the batch and the batch
  as the channels (``[Ci, H, W, B]``), convolved with the output gradient as a
  ``[H', W', B, Co]`` kernel; the result ``[Ci, kh, kw, Co]`` transposed to
  ``[kh, kw, Ci, Co]``.

Both are the gradients JAX derives, summed in another order, so they agree to
rounding. :func:`conv_general_dilated` has ``lax.conv_general_dilated``'s
signature, for ``flax.linen.Conv(conv_general_dilated=...)``: it takes this
path for what the network uses (stride 1, no dilation, one group, ``NHWC`` /
``HWIO``, padding within the kernel) and hands anything else to
``lax.conv_general_dilated`` unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

DIMENSION_NUMBERS = ("NHWC", "HWIO", "NHWC")
Padding = tuple[tuple[int, int], tuple[int, int]]


def _convolve(x: jax.Array, w: jax.Array, padding: Padding, precision: Any) -> jax.Array:
    return lax.conv_general_dilated(
        x, w, (1, 1), padding, dimension_numbers=DIMENSION_NUMBERS, precision=precision
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def conv2d(x: jax.Array, w: jax.Array, padding: Padding, precision: Any = None) -> jax.Array:
    """A stride-1 convolution, ``lax.conv_general_dilated``'s value.

    Args:
        x: [B, H, W, Ci] input.
        w: [kh, kw, Ci, Co] kernel.
        padding: ``((top, bottom), (left, right))`` zeros around the input,
            each between 0 and the kernel's side minus 1.
        precision: passed to ``lax.conv_general_dilated``.

    Returns:
        [B, H', W', Co] with ``H' = H + top + bottom - kh + 1`` (and W' alike).
    """
    return _convolve(x, w, padding, precision)


def _conv2d_fwd(x, w, padding, precision):
    return _convolve(x, w, padding, precision), (x, w)


def _conv2d_bwd(padding, precision, residuals, g):
    x, w = residuals  # [B, H, W, Ci], [kh, kw, Ci, Co]; g: [B, H', W', Co]
    (top, bottom), (left, right) = padding
    kh, kw = w.shape[:2]
    flipped = jnp.flip(w, (0, 1)).transpose(0, 1, 3, 2)  # [kh, kw, Co, Ci]
    dx = _convolve(g, flipped, ((kh - 1 - top, kh - 1 - bottom),
                                (kw - 1 - left, kw - 1 - right)), precision)
    dw = _convolve(x.transpose(3, 1, 2, 0), g.transpose(1, 2, 0, 3), padding, precision)
    return dx.astype(x.dtype), dw.transpose(1, 2, 0, 3).astype(w.dtype)


conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)


def _explicit_padding(padding: str | Sequence[tuple[int, int]], x: jax.Array,
                      w: jax.Array) -> Padding | None:
    if isinstance(padding, str):
        pads = lax.padtype_to_pads(x.shape[1:3], w.shape[:2], (1, 1), padding)
    else:
        pads = padding
    pads = tuple((int(lo), int(hi)) for lo, hi in pads)
    if len(pads) != 2 or not all(
        0 <= lo < k and 0 <= hi < k for (lo, hi), k in zip(pads, w.shape[:2], strict=True)
    ):
        return None
    return pads  # type: ignore[return-value]


def conv_general_dilated(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """``lax.conv_general_dilated``, through :func:`conv2d` where it applies (module doc)."""
    ones = lambda s: s is None or all(int(v) == 1 for v in s)  # noqa: E731
    pads = None
    if (lhs.ndim == 4 and rhs.ndim == 4 and ones(window_strides) and ones(lhs_dilation)
            and ones(rhs_dilation) and feature_group_count == 1 and batch_group_count == 1
            and preferred_element_type is None
            and lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
            == lax.conv_dimension_numbers(lhs.shape, rhs.shape, DIMENSION_NUMBERS)):
        pads = _explicit_padding(padding, lhs, rhs)
    if pads is None:
        return lax.conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
            feature_group_count, batch_group_count, precision, preferred_element_type,
        )
    return conv2d(lhs, rhs, pads, precision)
