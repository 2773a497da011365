"""c4jax: AlphaZero for Connect Four in JAX.

``c4jax.Player`` (a trained agent behind a move-string API) is loaded on first
use, so importing a submodule such as ``c4jax.env`` stays light.
"""

__all__ = ["Player"]


def __getattr__(name):
    if name == "Player":
        from c4jax.player import Player

        return Player
    raise AttributeError(f"module 'c4jax' has no attribute {name!r}")
