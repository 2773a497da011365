"""bench/subtree_share.py: the share of a search spent below the move it played."""

import dataclasses

import jax
import numpy as np

from bench import subtree_share
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import network


def test_shares_count_the_visits_below_the_move_played():
    cfg = config_lib.load("tiny")
    search_config = dataclasses.replace(cfg.search, num_simulations=16)
    net = network.make_network(cfg.network)
    variables = network.init_variables(net, jax.random.key(0))
    shares = subtree_share.subtree_shares(
        network.make_apply_fn(net), search_config, variables, jax.random.key(1),
        batch=4, moves=3,
    )
    assert shares.shape == (12,)  # no game ends within three moves
    # At most the whole search but the child's own expansion, in steps of 1/16.
    assert np.all(shares <= 15 / 16)
    np.testing.assert_allclose(shares * 16, np.round(shares * 16))
    # Gumbel plays a survivor of sequential halving: with 16 simulations over 7
    # moves (1 each, then 1 more for the best 4, then 2 more for the best 2) the
    # move played has at least 4 visits, 3 of them below its expansion.
    assert np.all(shares >= 3 / 16)
