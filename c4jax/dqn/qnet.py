"""The Q-functions: "Yoda" (an MLP over the cells) and "Grogu" (linear in cells and alignments).

Both read the observation planes of ``env.observe`` (``[S, H, W, 2]``, the
player to move first) and return ``[S, A]`` action values from the side of the
player to move. The board enters as 42 cells, +1 for the mover's stones, -1 for
the opponent's, 0 for empty; Grogu adds the sum of the four cells of each of
the 69 alignments where four in a row can be made (``ALIGNMENTS``, a table
built once at import).

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


def _alignments() -> np.ndarray:
    """[L, H * W] float32 0/1: the cells (row-major, row 0 on top) of each four-cell line."""
    lines = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):  # horizontal, vertical, two diagonals
        for r in range(H):
            for c in range(W):
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if all(0 <= rr < H and 0 <= cc < W for rr, cc in cells):
                    row = np.zeros(H * W, np.float32)
                    row[[rr * W + cc for rr, cc in cells]] = 1.0
                    lines.append(row)
    return np.stack(lines)


ALIGNMENTS = _alignments()  # [69, 42]
NUM_FEATURES = H * W + ALIGNMENTS.shape[0]  # Grogu's 42 + 69 = 111 inputs

QApply = Callable[[dict, jax.Array], jax.Array]  # (params, obs [S, H, W, 2]) -> [S, A]


def cells(obs: jax.Array) -> jax.Array:
    """[S, H, W, 2] planes -> [S, 42] cells: +1 the mover's stone, -1 the opponent's, 0 empty."""
    return (obs[..., 0] - obs[..., 1]).reshape(*obs.shape[:-3], H * W)


def grogu_features(obs: jax.Array) -> jax.Array:
    """[S, H, W, 2] -> [S, 111]: the 42 cells, then the sum of each alignment's cells (-4..4)."""
    x = cells(obs)
    return jnp.concatenate([x, x @ ALIGNMENTS.T], axis=-1)


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


def make_q_network(config: ModelConfig) -> nn.Module:
    """The Flax module of ``config`` (ValueError naming a bad field)."""
    if config.kind == "linear":
        return LinearQ()
    if config.kind == "mlp":
        return MLPQ(hidden=hidden_sizes(config))
    raise ValueError(f"config field model.kind: got {config.kind!r}, allowed: mlp, linear")


def init_params(module: nn.Module, key: jax.Array) -> dict:
    """The module's parameters, initialised from ``key``."""
    return module.init(key, jnp.zeros((1, H, W, 2), jnp.float32))["params"]


def make_apply(module: nn.Module) -> QApply:
    """``apply(params, obs [S, H, W, 2]) -> [S, A]`` float32 action values."""

    def apply(params: dict, obs: jax.Array) -> jax.Array:
        return module.apply({"params": params}, obs)

    return apply
