"""The periodic evaluation of a training run, and gating.

Each evaluation plays the agent (network + search, no noise, best move)
against the fixed reference opponents and, if asked, measures its mistake rate
on a sample of the Pons solver sets. Its ``score``, which ranks checkpoints,
is 1 - mistake rate when there is a solver sample (the matches against random
and lookahead saturate early and would only add noise), else the mean of the
match scores (wins + draws / 2).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import numpy as np

from c4jax.judge import arena, registry, solver
from c4jax.schema import EvalBase

GATING_OPENING_MOVES = 2  # random first plies: deterministic agents would replay 2 games

OPPONENTS = ("random", "lookahead")  # agent specs (``registry``), also the metric names


def evaluate(
    act: Callable,
    variables: dict,
    key: jax.Array,
    config: EvalBase,
    *,
    opponents: Sequence[str] = OPPONENTS,
) -> dict:
    """Evaluates ``act`` bound to ``variables``.

    Args:
        act: ``act(variables, key, state[B]) -> [B]`` (``search.make_alphazero_act``).
        variables: the network variables to bind.
        key: PRNG key.
        config: games per opponent and the solver sample: the ``games``,
            ``solver_positions`` and ``solver_sets`` of either engine's eval section
            (both extend ``schema.EvalBase``).
        opponents: agent specs of the reference opponents.

    Returns:
        Floats: ``win_rate/<opponent>``, ``score/<opponent>``, with the solver
        sample ``mistake/<set>``, ``mistake_nontrivial/<set>`` and
        ``mistake_rate`` (their mean over sets), and the overall ``score``.
    """
    agent = functools.partial(act, variables)
    match_key, solver_key = jax.random.split(key)
    results, parts = {}, []
    for i, spec in enumerate(opponents):
        name, opponent = registry.make_agent(spec)
        match = arena.play_games(agent, opponent, jax.random.fold_in(match_key, i), config.games)
        results[f"win_rate/{name}"] = match.wins / match.num_games
        results[f"score/{name}"] = match.score
        parts.append(match.score)
    if config.solver_positions:
        sets = config.solver_sets.split(",")
        by_set = solver.evaluate_agent(
            agent, solver_key, sets, config.solver_positions, batch_size=config.solver_positions
        )
        for name, summary in by_set.items():
            results[f"mistake/{name}"] = summary["mistake_rate"]
            results[f"mistake_nontrivial/{name}"] = summary["nontrivial_mistake_rate"]
        results["mistake_rate"] = float(np.mean([s["mistake_rate"] for s in by_set.values()]))
        parts = [1.0 - results["mistake_rate"]]
    results["score"] = float(np.mean(parts))
    return results


def gating_match(
    act: Callable, candidate: dict, best: dict, key: jax.Array, *, num_games: int
) -> arena.MatchResult:
    """The candidate network against the best so far, both as ``act`` agents.

    Games come in pairs from the same random opening with colours swapped.
    """
    return arena.play_games(
        functools.partial(act, candidate),
        functools.partial(act, best),
        key,
        num_games,
        opening_moves=GATING_OPENING_MOVES,
    )
