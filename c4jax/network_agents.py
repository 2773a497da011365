"""Agents backed by the policy-value network, in the ``agents`` interface.

``make_alphazero_act(apply_fn, search_config, num_simulations)`` returns
``act(variables, key, state) -> action [B]``; bind the network variables with
``functools.partial(act, variables)`` to get an agent ``act(key, state)`` whose
arrays the arena passes as jit arguments (no recompiling per checkpoint).
With ``num_simulations == 0`` the agent is the network alone (highest-prior
legal move); otherwise network + search, no noise, best move.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax

from c4jax import env, search
from c4jax.config import SearchConfig


def make_alphazero_act(
    apply_fn: Callable, search_config: SearchConfig, *, num_simulations: int
) -> Callable[[dict, jax.Array, env.State], jax.Array]:
    """``act(variables, key, state[B]) -> [B] int32`` playing the search's best move."""
    config = dataclasses.replace(search_config, num_simulations=num_simulations)
    search_fn = search.make_search(apply_fn, config)

    def act(variables, key, state):
        return search_fn(variables, key, state, evaluation=True).action

    return act
