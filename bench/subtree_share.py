"""What share of the next search's simulations subtree reuse could save.

Self-play with a run's network and search settings (its simulations, the
search's noise on), B games from the empty board, finished games restarting:
for each search, the simulations it spent below the move it played, less the
one that expanded that child (root reuse already saves it), as a share of the
next search's simulations. Subtree reuse could skip at most that many network
calls in the next search (and only by changing the search: mctx starts every
search from a fresh tree, and Gumbel's sequential halving plans its own visits).

Usage::

    python -m bench.subtree_share RUN_DIR [--moves 30] [--batch 256]
"""

from __future__ import annotations

import argparse
import sys


def subtree_shares(apply_fn, search_config, variables, key, *, batch: int, moves: int):
    """[P] float64 share of the next search's simulations already spent below each
    move played, over the P live positions of ``moves`` self-play moves of
    ``batch`` games (``(visits of the move played - 1) / simulations``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from c4jax import env
    from c4jax.alphazero import search

    search_fn = jax.jit(search.make_search(apply_fn, search_config))
    games = env.init_batch(batch)
    shares = []
    for step_key in jax.random.split(key, moves):
        out = search_fn(variables, step_key, games)
        visits, action = np.asarray(out.visit_counts), np.asarray(out.action)
        live = ~np.asarray(games.terminated)
        below = visits[np.arange(batch), action] - 1
        shares.append((below.clip(0) / search_config.num_simulations)[live])
        after = env.step(games, out.action)
        done = after.terminated
        games = jax.tree.map(
            lambda new, old, done=done: jnp.where(done, new, old), env.init_batch(batch), after
        )
    return np.concatenate(shares)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="a run directory (its best checkpoint)")
    p.add_argument("--moves", type=int, default=30, help="self-play moves (default 30)")
    p.add_argument("--batch", type=int, default=256, help="games at once (default 256)")
    args = p.parse_args(argv)
    if args.moves < 1 or args.batch < 1:
        p.error("--moves and --batch must be >= 1")
    from c4jax.run import xla_flags

    xla_flags.enable_fast_cpu()  # before JAX starts
    import jax
    import numpy as np

    from c4jax.alphazero import network
    from c4jax.store import checkpoints

    restored = checkpoints.restore_variables(args.run_dir, None)
    config = restored.config
    apply_fn = network.make_apply_fn(network.make_network(config.network))
    shares = subtree_shares(apply_fn, config.search, restored.variables, jax.random.key(0),
                            batch=args.batch, moves=args.moves)
    print(f"{shares.size} positions, {config.search.algorithm} with "
          f"{config.search.num_simulations} simulations: share of the next search's "
          f"simulations already spent below the move played: mean {shares.mean():.3f}, "
          f"median {np.median(shares):.3f}, 10-90% {np.percentile(shares, 10):.3f}-"
          f"{np.percentile(shares, 90):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
