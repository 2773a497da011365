"""Batched matches between two agents.

``play_games(agent_a, agent_b, key, num_games)`` plays all games in lockstep in
one jitted ``lax.while_loop`` (at most 42 plies). Games come in pairs that share
the same (optional) random opening: in game ``2i`` agent_a moves first, in game
``2i + 1`` agent_b does. Because every live game is at the same ply, the games
split into two fixed halves ("a moves first" / "b moves first") and each agent
is called once per ply on one half-batch, never on games where it is not to
move.

Agents that are ``functools.partial`` objects have their array arguments (for
example network parameters) passed to the compiled function as arguments, so a
new partial with new parameters of the same shapes reuses the compiled match.
Compiled matches are cached per (agents, num_games, opening_moves).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from c4jax import env
from c4jax.agents import random_agent

Agent = Callable[[jax.Array, env.State], jax.Array]


def wilson_interval(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a proportion (95% by default).

    Args:
        successes: number of successes (may be fractional, e.g. wins + draws/2).
        n: number of trials.
        z: normal quantile of the two-sided level.

    Returns:
        (low, high) in [0, 1]; (0, 1) when ``n == 0``.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / denom
    # The interval contains p; min/max keep that true under rounding at p = 0 or 1.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """Outcome of a match, from agent_a's side (host-side numpy).

    ``score_ci`` is the 95% Wilson score interval of ``score``, treating each
    game as one trial worth its points (1, 1/2, 0). Draws have less variance
    than a win/loss coin flip, so with many draws the interval is conservative.
    """

    wins: int
    draws: int
    losses: int
    outcomes: np.ndarray  # [G] int8: +1 a won, 0 draw, -1 a lost
    a_first: np.ndarray  # [G] bool: agent_a moved first
    num_moves: np.ndarray  # [G] int32: plies in each game

    @classmethod
    def from_games(
        cls, outcomes: np.ndarray, a_first: np.ndarray, num_moves: np.ndarray
    ) -> MatchResult:
        """The result of games with these per-game outcomes (+1 / 0 / -1 for a)."""
        return cls(
            wins=int(np.sum(outcomes == 1)),
            draws=int(np.sum(outcomes == 0)),
            losses=int(np.sum(outcomes == -1)),
            outcomes=outcomes,
            a_first=a_first,
            num_moves=num_moves,
        )

    @property
    def num_games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games."""
        return (self.wins + 0.5 * self.draws) / max(self.num_games, 1)

    @property
    def score_ci(self) -> tuple[float, float]:
        """95% Wilson interval of ``score``."""
        return wilson_interval(self.wins + 0.5 * self.draws, self.num_games)

    def __str__(self) -> str:
        low, high = self.score_ci
        return (
            f"+{self.wins} ={self.draws} -{self.losses} of {self.num_games}: "
            f"score {self.score:.3f} [{low:.3f}, {high:.3f}]"
        )


# --- Splitting agents into a static part (cache key) and array arguments. ---


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray)


def split_agent(agent: Agent) -> tuple[Any, list]:
    """(hashable static description, list of array leaves) of an agent.

    A ``functools.partial`` is split into its function, the tree structure of
    its bound arguments with non-array leaves, and the array leaves. Any other
    callable is static as a whole.
    """
    if isinstance(agent, functools.partial):
        leaves, treedef = jax.tree.flatten((agent.args, agent.keywords))
        arrays = [x for x in leaves if _is_array(x)]
        statics = tuple(None if _is_array(x) else x for x in leaves)
        static = ("partial", agent.func, treedef, statics)
        try:
            hash(static)
        except TypeError:
            return ("object", agent), []
        return static, arrays
    return ("object", agent), []


def join_agent(static: Any, arrays: list) -> Agent:
    """Inverse of ``split_agent``."""
    if static[0] == "object":
        return static[1]
    _, func, treedef, statics = static
    it = iter(arrays)
    leaves = [next(it) if s is None else s for s in statics]
    args, keywords = jax.tree.unflatten(treedef, leaves)
    return functools.partial(func, *args, **keywords)


# --- The compiled match. ---


def _build_match(static_a, static_b, num_pairs: int, opening_moves: int):
    """Jitted ``(key, arrays_a, arrays_b) -> (winner [2, P], num_moves [2, P])``.

    Row 0 holds the games in which agent_a moves first, row 1 those in which
    agent_b does; column i of both rows shares one opening.
    """

    def match(key, arrays_a, arrays_b):
        agent_a = join_agent(static_a, arrays_a)
        agent_b = join_agent(static_b, arrays_b)
        k_open, k_play = jax.random.split(key)

        # Random opening, shared by the two games of a pair.
        def opening_ply(i, s):
            return env.step(s, random_agent(jax.random.fold_in(k_open, i), s))

        start = jax.lax.fori_loop(0, opening_moves, opening_ply, env.init_batch(num_pairs))
        a_first, b_first = start, start

        def ply(k, first_group, second_group, a_to_move_in_first):
            """One ply: one agent moves in the a-first half, the other in the b-first half."""
            k1, k2 = jax.random.split(k)
            mover1, mover2 = (agent_a, agent_b) if a_to_move_in_first else (agent_b, agent_a)
            first_group = env.step(first_group, mover1(k1, first_group))
            second_group = env.step(second_group, mover2(k2, second_group))
            return first_group, second_group

        # In the a-first half agent_a moves at even plies. ``opening_moves`` is
        # static, so the parity of each of the two plies per iteration is too.
        a_moves_first_ply = opening_moves % 2 == 0

        def cond(carry):
            i, _, g1, g2 = carry
            live = jnp.any(~g1.terminated) | jnp.any(~g2.terminated)
            return (i < env.NUM_CELLS) & live

        def body(carry):
            i, k, g1, g2 = carry
            k, k_even, k_odd = jax.random.split(k, 3)
            g1, g2 = ply(k_even, g1, g2, a_moves_first_ply)
            g1, g2 = ply(k_odd, g1, g2, not a_moves_first_ply)
            return i + 2, k, g1, g2

        _, _, g1, g2 = jax.lax.while_loop(
            cond, body, (jnp.int32(opening_moves), k_play, a_first, b_first)
        )
        winner = jnp.stack([g1.winner, g2.winner])
        num_moves = jnp.stack([g1.num_moves, g2.num_moves])
        return winner, num_moves

    return jax.jit(match)


_CACHE_SIZE = 32
_match_cache: collections.OrderedDict = collections.OrderedDict()


def _get_match(static_a, static_b, num_pairs: int, opening_moves: int):
    cache_key = (static_a, static_b, num_pairs, opening_moves)
    fn = _match_cache.get(cache_key)
    if fn is None:
        fn = _build_match(static_a, static_b, num_pairs, opening_moves)
        _match_cache[cache_key] = fn
        while len(_match_cache) > _CACHE_SIZE:
            _match_cache.popitem(last=False)
    else:
        _match_cache.move_to_end(cache_key)
    return fn


def play_games(
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int,
    *,
    opening_moves: int = 0,
) -> MatchResult:
    """Plays ``num_games`` games between two agents, colours alternated.

    Game ``2i`` has agent_a moving first and game ``2i + 1`` agent_b, both from
    the same opening: the first ``opening_moves`` plies are uniformly random
    (0 = start from the empty board). An odd ``num_games`` drops the last
    b-first game.

    Args:
        agent_a: ``act(key, state[B]) -> [B] int32``.
        agent_b: the opponent, same interface.
        key: PRNG key.
        num_games: games to play, >= 1.
        opening_moves: random plies before the agents take over, 0..41.

    Returns:
        A ``MatchResult`` from agent_a's side.
    """
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    if not 0 <= opening_moves < env.NUM_CELLS:
        raise ValueError(f"opening_moves must be in 0..41, got {opening_moves}")
    static_a, arrays_a = split_agent(agent_a)
    static_b, arrays_b = split_agent(agent_b)
    num_pairs = (num_games + 1) // 2
    match = _get_match(static_a, static_b, num_pairs, opening_moves)
    winner, num_moves = jax.device_get(match(key, arrays_a, arrays_b))  # [2, P] each

    # Interleave: game 2i = row 0 (a first, a is player 0), 2i+1 = row 1 (a is player 1).
    a_player = np.array([[0], [1]])
    outcome = np.where(winner == -1, 0, np.where(winner == a_player, 1, -1))
    outcomes = outcome.T.reshape(-1)[:num_games].astype(np.int8)
    a_first = np.tile([True, False], num_pairs)[:num_games]
    moves = np.asarray(num_moves).T.reshape(-1)[:num_games].astype(np.int32)
    return MatchResult.from_games(outcomes, a_first, moves)
