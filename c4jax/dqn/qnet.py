"""The Q-functions: "Yoda" (an MLP over the cells), "Grogu" (linear in cells and
alignments) and "Grogu+" (linear, with threat features).

Both read the observation planes of ``env.observe`` (``[S, H, W, 2]``, the
player to move first) and return ``[S, A]`` action values from the side of the
player to move. The board enters as 42 cells, +1 for the mover's stones, -1 for
the opponent's, 0 for empty; Grogu adds the sum of the four cells of each of
the 69 alignments where four in a row can be made (``ALIGNMENTS``: env's lines
of four, ``env.LINES``, over the observation's cells). Grogu+ is still one
matrix product, over Grogu's 111 features plus 42 about the playable cell of
each column (the cell a move there would fill): whether it completes a four
for the mover (a win now) or for the opponent (a block now), whether the cell
above it is such a cell (playing here hands the opponent a win, or lets them
spoil the mover's), and how many alignments holding two of the mover's (or the
opponent's) stones and nothing else run through it (threats made, or
prevented). A sum over alignments cannot tell which cell of a three is empty;
these features can, and a linear function of them can learn to win in one and
to block.

Shapes: S batch, A = 7 actions, H = 6 rows, W = 7 columns, L = 69 alignments.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from c4jax import env
from c4jax.dqn.config import ModelConfig, hidden_sizes

H, W, A = env.NUM_ROWS, env.NUM_COLS, env.NUM_ACTIONS


# [L, H * W] float32 0/1: the cells (row-major, row 0 on top) of each four-cell line, in
# ``env.LINES``'s order (Grogu's trained weights index their features by it).
ALIGNMENTS = env.LINE_PLANES.reshape(env.NUM_LINES, H * W).astype(np.float32)  # [69, 42]
NUM_FEATURES = H * W + ALIGNMENTS.shape[0]  # Grogu's 42 + 69 = 111 inputs
NUM_PLUS_FEATURES = NUM_FEATURES + 6 * W  # Grogu+: 111 + 6 per column = 153

QApply = Callable[[dict, jax.Array], jax.Array]  # (params, obs [S, H, W, 2]) -> [S, A]


def cells(obs: jax.Array) -> jax.Array:
    """[S, H, W, 2] planes -> [S, 42] cells: +1 the mover's stone, -1 the opponent's, 0 empty."""
    return (obs[..., 0] - obs[..., 1]).reshape(*obs.shape[:-3], H * W)


def grogu_features(obs: jax.Array) -> jax.Array:
    """[S, H, W, 2] -> [S, 111]: the 42 cells, then the sum of each alignment's cells (-4..4)."""
    x = cells(obs)
    return jnp.concatenate([x, x @ ALIGNMENTS.T], axis=-1)


def _completing_cells(empty: jax.Array, count_a: jax.Array, count_b: jax.Array) -> jax.Array:
    """[S, 42] bool: empty cells that finish an alignment holding three of ``a``'s and none
    of ``b``'s (``count_*`` [S, L] stones per alignment)."""
    three = ((count_a == 3) & (count_b == 0)).astype(jnp.float32)
    return (empty > 0) & (three @ ALIGNMENTS > 0)


def _per_column(flags: jax.Array) -> jax.Array:
    """[S, 42] (one cell per column at most, e.g. the playable ones) -> [S, W] sums."""
    return flags.reshape(*flags.shape[:-1], H, W).sum(axis=-2)


def grogu_plus_features(obs: jax.Array) -> jax.Array:
    """[S, H, W, 2] -> [S, 153]: Grogu's 111 features, then 6 x 7 about each column's playable
    cell (0 for a full column), from the side of the player to move:

    ``win`` (it completes a mover's four), ``block`` (an opponent's), ``gives``
    (the cell above it completes an opponent's four), ``spoils`` (the cell
    above completes a mover's), ``makes`` and ``stops`` (alignments through it
    holding two stones of the mover's, or two of the opponent's, and no other).
    """
    me = obs[..., 0].reshape(*obs.shape[:-3], H * W)
    op = obs[..., 1].reshape(*obs.shape[:-3], H * W)
    filled = me + op
    empty = 1.0 - filled
    # Row 0 is the top: a cell is playable when empty and on the bottom row or above a stone.
    below = jnp.concatenate([filled[..., W:], jnp.ones_like(filled[..., :W])], axis=-1)
    playable = empty * below
    above_playable = jnp.concatenate(  # [S, 42] the cell directly above a playable one
        [playable[..., W:], jnp.zeros_like(playable[..., :W])], axis=-1
    )
    count_me, count_op = me @ ALIGNMENTS.T, op @ ALIGNMENTS.T  # [S, L]
    win_me = _completing_cells(empty, count_me, count_op)
    win_op = _completing_cells(empty, count_op, count_me)
    two_me = ((count_me == 2) & (count_op == 0)).astype(jnp.float32) @ ALIGNMENTS  # [S, 42]
    two_op = ((count_op == 2) & (count_me == 0)).astype(jnp.float32) @ ALIGNMENTS
    extra = [
        _per_column(playable * win_me),
        _per_column(playable * win_op),
        _per_column(above_playable * win_op),
        _per_column(above_playable * win_me),
        _per_column(playable * two_me),
        _per_column(playable * two_op),
    ]
    return jnp.concatenate([grogu_features(obs), *extra], axis=-1)


class MLPQ(nn.Module):
    """Yoda: cells -> Dense(h) -> ReLU ... -> Dense(A)."""

    hidden: tuple[int, ...] = (180, 180, 180)

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = cells(obs)
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(A)(x)


class LinearQ(nn.Module):
    """Grogu: one matrix product, ``Q = features @ kernel + bias``."""

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return nn.Dense(A)(grogu_features(obs))


class LinearPlusQ(nn.Module):
    """Grogu+: one matrix product, ``Q = grogu_plus_features @ kernel + bias``."""

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return nn.Dense(A)(grogu_plus_features(obs))


def make_q_network(config: ModelConfig) -> nn.Module:
    """The Flax module of ``config`` (ValueError naming a bad field)."""
    if config.kind == "linear":
        return LinearQ()
    if config.kind == "linear_plus":
        return LinearPlusQ()
    if config.kind == "mlp":
        return MLPQ(hidden=hidden_sizes(config))
    raise ValueError(
        f"config field model.kind: got {config.kind!r}, allowed: mlp, linear, linear_plus"
    )


def init_params(module: nn.Module, key: jax.Array) -> dict:
    """The module's parameters, initialised from ``key``."""
    return module.init(key, jnp.zeros((1, H, W, 2), jnp.float32))["params"]


def make_apply(module: nn.Module) -> QApply:
    """``apply(params, obs [S, H, W, 2]) -> [S, A]`` float32 action values."""

    def apply(params: dict, obs: jax.Array) -> jax.Array:
        return module.apply({"params": params}, obs)

    return apply
