"""The periodic evaluation of a training run against fixed reference opponents.

The score that ranks checkpoints is the mean match score (wins + draws / 2)
against the reference opponents.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax

from c4jax import agents, arena

OPPONENTS: dict[str, Callable] = {
    "random": agents.random_agent,
    "lookahead": agents.lookahead_agent,
}


def evaluate_against_references(
    act: Callable, variables: dict, key: jax.Array, *, num_games: int
) -> dict[str, float]:
    """Plays ``act`` (bound to ``variables``) against each reference opponent.

    Args:
        act: ``act(variables, key, state[B]) -> [B]`` (see ``network_agents``).
        variables: the network variables to bind.
        key: PRNG key.
        num_games: games per opponent, half with each colour.

    Returns:
        ``{"win_rate/<opponent>", "score/<opponent>", "score"}`` floats, where
        ``score`` is the mean score over the opponents.
    """
    agent = functools.partial(act, variables)
    results = {}
    scores = []
    for name, opponent in OPPONENTS.items():
        key, match_key = jax.random.split(key)
        match = arena.play_games(agent, opponent, match_key, num_games)
        results[f"win_rate/{name}"] = match.wins / match.num_games
        results[f"score/{name}"] = match.score
        scores.append(match.score)
    results["score"] = sum(scores) / len(scores)
    return results
