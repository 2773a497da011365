"""Batched matches between two agents, and round robins.

``play_games(agent_a, agent_b, key, num_games)`` plays all games in lockstep.
Games come in pairs that share the same (optional) random opening: in game
``2i`` agent_a moves first, in game ``2i + 1`` agent_b does. Because every live
game is at the same ply, the games split into two fixed halves ("a moves
first" / "b moves first") and each agent is called once per ply on one
half-batch, never on games where it is not to move.

With two jittable agents the whole match is one jitted ``lax.while_loop`` (at
most 42 plies); the arrays that ``functools.partial`` agents bind (network
variables) are its arguments, so new variables of the same shapes reuse the
compiled match. Compiled matches live in ``protocol.cached_jit`` per (agents,
games, opening plies). With a ``protocol.HostAgent`` on either side the same
match runs ply by ply from Python, the jittable side still compiled.

``play_match`` plays a long match in equal chunks, ``round_robin`` every pair
of a pool, and ``match_summary`` turns a result into JSON-friendly rates.

Progress (``progress_steps``, also the evaluate command's solver loop): a tqdm
bar where stderr is a terminal, else one plain line per finished step on
stderr, so that a log file gets no carriage-return frames.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from c4jax import env
from c4jax.baselines import uniform_choice, winning_moves
from c4jax.judge import protocol
from c4jax.judge.protocol import Agent, join_agent, split_agent
from c4jax.judge.stats import format_rate, rate_with_interval, wilson_interval

ProgressMode = Literal["bar", "lines", "off"]
T = TypeVar("T")


# --- Progress: a bar on a terminal, plain lines elsewhere. ---


def progress_mode(progress: bool | ProgressMode, stream=None) -> ProgressMode:
    """``bar``, ``lines`` or ``off``; True picks ``bar`` where ``stream`` (stderr) is a
    terminal, else ``lines``; False is ``off``."""
    if progress is False:
        return "off"
    if progress is not True:
        if isinstance(progress, str) and progress in ("bar", "lines", "off"):
            return progress
        raise ValueError(f"progress: got {progress!r}, allowed: True, False, 'bar', 'lines'"
                         " or 'off'")
    stream = sys.stderr if stream is None else stream
    try:
        return "bar" if stream.isatty() else "lines"
    except (AttributeError, ValueError):
        return "lines"


def progress_steps(
    items: Iterable[T],
    *,
    desc: str | None,
    unit: str,
    progress: bool | ProgressMode = True,
    label: Callable[[T], str] | None = None,
    leave: bool = True,
    stream=None,
) -> Iterator[T]:
    """Yields ``items``, showing progress as ``progress_mode`` picks.

    ``bar``: a tqdm bar labelled ``desc``, ``label(item)`` after it while the
    item runs. ``lines``: after each item, one line
    ``DESC: UNIT i/n (LABEL), 4.2 s`` on ``stream`` (default stderr).
    """
    items = list(items)
    stream = sys.stderr if stream is None else stream
    mode = progress_mode(progress, stream)
    if mode == "bar":
        bar = tqdm(items, desc=desc, unit=unit, leave=leave, file=stream)
        try:
            for item in bar:
                if label is not None:
                    bar.set_postfix_str(label(item))
                yield item
        finally:
            bar.close()
        return
    for i, item in enumerate(items, 1):
        start = time.perf_counter()
        yield item
        if mode == "lines":
            what = f" ({label(item)})" if label is not None else ""
            head = f"{desc}: " if desc else ""
            seconds = time.perf_counter() - start
            print(f"{head}{unit} {i}/{len(items)}{what}, {seconds:.1f} s", file=stream, flush=True)


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


# --- The match: compiled whole, or ply by ply with a host agent. ---


MAX_EXHAUSTIVE_OPENING = 4  # 7**4 = 2401 openings; up to 6 plies every sequence is legal
MAX_OPENING_MOVES = 20  # random opening plies: none wins (see ``_opening``) up to this many


def num_exhaustive_openings(opening_moves: int) -> int:
    """How many distinct ``opening_moves``-ply openings there are: 7**K (K <= 4)."""
    if not 0 <= opening_moves <= MAX_EXHAUSTIVE_OPENING:
        raise ValueError(
            f"every opening: got {opening_moves} opening plies, allowed: "
            f"0..{MAX_EXHAUSTIVE_OPENING} (7^K openings)"
        )
    return env.NUM_ACTIONS**opening_moves


def _opening(
    key: jax.Array, *, num_pairs: int, opening_moves: int, exhaustive: bool = False,
    first_pair: int | jax.Array = 0,
) -> env.State:
    """[P] starting positions after ``opening_moves`` plies from the empty board.

    Random plies by default, each uniform over the legal moves that do not win
    at once, so that no game is decided before the agents move (only a
    position where every legal move wins, never met in 10**6 random 20-ply
    openings, takes one of them); ``exhaustive``: pair ``i`` plays the
    ``(first_pair + i)``-th (mod 7**K) of all K-ply sequences, the first ply the
    most significant base-7 digit (no column fills and no game ends within 6
    plies). ``first_pair`` ([] int, may be traced) lets a long match play the
    sequences in chunks.
    """
    pair = first_pair + jnp.arange(num_pairs)

    def opening_ply(i, s):
        if exhaustive:
            digit = (pair // env.NUM_ACTIONS ** (opening_moves - 1 - i)) % env.NUM_ACTIONS
            return env.step(s, digit.astype(jnp.int32))
        legal = env.legal_action_mask(s)  # [P, A]
        quiet = legal & ~winning_moves(s)
        allowed = jnp.where(jnp.any(quiet, axis=-1, keepdims=True), quiet, legal)
        return env.step(s, uniform_choice(jax.random.fold_in(key, i), allowed))

    return jax.lax.fori_loop(0, opening_moves, opening_ply, env.init_batch(num_pairs))


@functools.partial(jax.jit, static_argnums=0)
def _moves(static, arrays: list, key: jax.Array, state: env.State) -> jax.Array:
    """The moves [P] int32 of the agent ``join_agent(static, arrays)`` in ``state[P]``.

    Jitted on its own, so that tracing a match traces each agent once although
    every ply of the loop body calls it, and the next match with the same agent
    and batch (the other opponents of an evaluation) reuses that trace. XLA
    inlines the call: the compiled match is the same.
    """
    return join_agent(static, arrays)(key, state)


def _build_match(static_a, static_b, num_pairs: int, opening_moves: int, exhaustive: bool):
    """Jitted ``(key, arrays_a, arrays_b, first_pair) -> (winner [2, P], num_moves [2, P])``.

    Row 0 holds the games in which agent_a moves first, row 1 those in which
    agent_b does; column i of both rows shares one opening (``_opening``'s
    pair ``i``; ``first_pair`` [] int32 shifts the exhaustive ones).
    """

    def match(key, arrays_a, arrays_b, first_pair):
        agent_a = functools.partial(_moves, static_a, arrays_a)
        agent_b = functools.partial(_moves, static_b, arrays_b)
        k_open, k_play = jax.random.split(key)
        start = _opening(
            k_open, num_pairs=num_pairs, opening_moves=opening_moves, exhaustive=exhaustive,
            first_pair=first_pair,
        )

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
            cond, body, (jnp.int32(opening_moves), k_play, start, start)
        )
        winner = jnp.stack([g1.winner, g2.winner])
        num_moves = jnp.stack([g1.num_moves, g2.num_moves])
        return winner, num_moves

    return jax.jit(match)


Observer = Callable[[env.State, np.ndarray, bool], None]  # (state[B], actions [B], is_a)


def _play_on_host(
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_pairs: int,
    opening_moves: int,
    observer: Observer | None = None,
    exhaustive: bool = False,
    observed_games: int | None = None,
    first_pair: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The match of ``_build_match`` ply by ply from Python, for host agents.

    It draws the same keys in the same order as the compiled match, so a host
    agent that makes the same choices as a jittable one plays the same games.
    ``observer(state, actions, is_a)``, if given, sees every half-batch ply
    before it is played (finished games included), restricted to the first
    ``observed_games`` games (game 2i is column i of the a-first half, 2i + 1
    of the other; None: all).

    Returns:
        (winner [2, P], num_moves [2, P]) numpy.
    """
    k_open, k_play = jax.random.split(key)
    opening = protocol.cached_jit(
        ("opening", num_pairs, opening_moves, exhaustive),
        lambda: jax.jit(
            functools.partial(
                _opening, num_pairs=num_pairs, opening_moves=opening_moves, exhaustive=exhaustive
            )
        ),
    )
    step = protocol.cached_jit(("env.step",), lambda: jax.jit(env.step))
    act_a, act_b = protocol.batched_act(agent_a), protocol.batched_act(agent_b)
    g1 = g2 = opening(k_open, first_pair=jnp.int32(first_pair))
    counted = 2 * num_pairs if observed_games is None else observed_games
    seen = (2 * np.arange(num_pairs) < counted, 2 * np.arange(num_pairs) + 1 < counted)

    def observe(half, state, actions, is_a):
        if observer is not None and seen[half].any():
            state = jax.tree.map(lambda x: np.asarray(x)[seen[half]], jax.device_get(state))
            observer(state, np.asarray(actions)[seen[half]], is_a)

    a_moves_first_ply = opening_moves % 2 == 0
    i, k = opening_moves, k_play
    while i < env.NUM_CELLS and not (np.all(g1.terminated) and np.all(g2.terminated)):
        k, k_even, k_odd = jax.random.split(k, 3)
        for k_ply, a_in_first in ((k_even, a_moves_first_ply), (k_odd, not a_moves_first_ply)):
            k1, k2 = jax.random.split(k_ply)
            mover1, mover2 = (act_a, act_b) if a_in_first else (act_b, act_a)
            m1, m2 = mover1(k1, g1), mover2(k2, g2)
            observe(0, g1, m1, a_in_first)
            observe(1, g2, m2, not a_in_first)
            g1, g2 = step(g1, m1), step(g2, m2)
        i += 2
    winner = np.stack([np.asarray(g1.winner), np.asarray(g2.winner)])
    num_moves = np.stack([np.asarray(g1.num_moves), np.asarray(g2.num_moves)])
    return winner, num_moves


def play_games(
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int,
    *,
    opening_moves: int = 0,
    observer: Observer | None = None,
    every_opening: bool = False,
    observed_games: int | None = None,
    first_opening: int = 0,
) -> MatchResult:
    """Plays ``num_games`` games between two agents, colours alternated.

    Game ``2i`` has agent_a moving first and game ``2i + 1`` agent_b, both from
    the same opening: the first ``opening_moves`` plies are uniformly random
    (0 = start from the empty board). An odd ``num_games`` drops the last
    b-first game.

    Args:
        agent_a: ``act(key, state[B]) -> [B] int32``, jittable or a ``HostAgent``.
        agent_b: the opponent, same interface.
        key: PRNG key.
        num_games: games to play, >= 1.
        opening_moves: random plies before the agents take over, 0..20, none of
            them winning the game, so every game is decided by the agents' moves.
        observer: ``observer(state[B], actions [B], is_a)`` called before every
            ply of the agents (positions with numpy leaves, finished games
            included) with the games that count only (not the b-first game an
            odd ``num_games`` drops); it makes the match run ply by ply from Python.
        every_opening: the openings are not random but all 7**K K-ply
            sequences in turn (K = ``opening_moves`` <= 4): with ``num_games``
            = 2 * 7**K, every opening once in each colour.
        first_opening: with ``every_opening``, games 2i and 2i + 1 play
            sequence number ``first_opening + i`` (mod 7**K): a long match in
            chunks (``play_match``). Ignored otherwise.
        observed_games: the observer sees only the first this many games, 1 to
            ``num_games`` (``play_match``'s last chunk; None: ``num_games``).

    Returns:
        A ``MatchResult`` from agent_a's side.
    """
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    if not 0 <= opening_moves <= MAX_OPENING_MOVES:
        raise ValueError(
            f"opening_moves must be in 0..{MAX_OPENING_MOVES}, got {opening_moves}")
    if every_opening:
        num_exhaustive_openings(opening_moves)  # checks the range
    observed_games = num_games if observed_games is None else observed_games
    if not 1 <= observed_games <= num_games:
        raise ValueError(f"observed_games must be in 1..{num_games}, got {observed_games}")
    if first_opening < 0:
        raise ValueError(f"first_opening must be >= 0, got {first_opening}")
    first_pair = first_opening if every_opening else 0
    num_pairs = (num_games + 1) // 2
    if protocol.is_host(agent_a) or protocol.is_host(agent_b) or observer is not None:
        winner, num_moves = _play_on_host(
            agent_a, agent_b, key, num_pairs, opening_moves, observer, every_opening,
            observed_games, first_pair,
        )
    else:
        static_a, arrays_a = split_agent(agent_a)
        static_b, arrays_b = split_agent(agent_b)
        match = protocol.cached_jit(
            ("match", static_a, static_b, num_pairs, opening_moves, every_opening),
            functools.partial(
                _build_match, static_a, static_b, num_pairs, opening_moves, every_opening
            ),
        )
        winner, num_moves = jax.device_get(
            match(key, arrays_a, arrays_b, jnp.int32(first_pair)))  # [2, P] each

    # Interleave: game 2i = row 0 (a first, a is player 0), 2i+1 = row 1 (a is player 1).
    a_player = np.array([[0], [1]])
    outcome = np.asarray(env.result_value(winner, a_player))  # [2, P]
    outcomes = outcome.T.reshape(-1)[:num_games].astype(np.int8)
    a_first = np.tile([True, False], num_pairs)[:num_games]
    moves = np.asarray(num_moves).T.reshape(-1)[:num_games].astype(np.int32)
    return MatchResult.from_games(outcomes, a_first, moves)


# --- Long matches, round robins, summaries. ---


def play_match(
    agent_a: Agent,
    agent_b: Agent,
    key: jax.Array,
    num_games: int,
    *,
    opening_moves: int = 2,
    batch_size: int = 256,
    progress: bool | ProgressMode = False,
    desc: str | None = None,
    observer: Observer | None = None,
    every_opening: bool = False,
) -> MatchResult:
    """``play_games`` in equal chunks of at most ``batch_size`` games.

    Chunks share one compiled match of whole pairs (an odd ``batch_size``
    plays one game fewer at once); the few surplus games of the last chunk
    are dropped, so exactly ``num_games`` games count (colours alternated).

    Args:
        agent_a, agent_b, key, opening_moves, observer: as for ``play_games``
            (the observer sees the games that count only).
        every_opening: as for ``play_games``; each chunk starts at the opening
            after the previous chunk's last, so that no opening repeats.
        num_games: games that count, >= 1.
        batch_size: games played at once, >= 2 (an odd one plays one fewer).
        progress: progress over the chunks, labelled ``desc`` (``progress_steps``:
            True is a bar on a terminal, else a line per chunk).

    Returns:
        A ``MatchResult`` over all games, from agent_a's side.
    """
    if isinstance(num_games, bool) or not isinstance(num_games, int | np.integer) or (
            num_games < 1):
        raise ValueError(f"num_games: got {num_games!r}, allowed: a whole number >= 1")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or (
            batch_size < 2):
        raise ValueError(f"batch_size: got {batch_size!r}, allowed: a whole number >= 2"
                         " (the games of a pair are played at once)")
    at_once = batch_size - batch_size % 2  # whole pairs
    size = math.ceil(num_games / math.ceil(num_games / at_once))
    size += size % 2  # whole pairs per chunk
    num_chunks = math.ceil(num_games / size)  # each with a game that counts
    parts = []
    chunks = progress_steps(
        range(num_chunks), desc=desc, unit="chunk", progress=progress, leave=False
    )
    for c in chunks:
        parts.append(
            play_games(
                agent_a,
                agent_b,
                jax.random.fold_in(key, c),
                size,
                opening_moves=opening_moves,
                observer=observer,
                every_opening=every_opening,
                observed_games=min(size, num_games - c * size),
                first_opening=c * size // 2,
            )
        )
    outcomes = np.concatenate([p.outcomes for p in parts])[:num_games]
    a_first = np.concatenate([p.a_first for p in parts])[:num_games]
    moves = np.concatenate([p.num_moves for p in parts])[:num_games]
    return MatchResult.from_games(outcomes, a_first, moves)


def round_robin(
    agents: Sequence[tuple[str, Agent]],
    key: jax.Array,
    num_games: int,
    *,
    opening_moves: int = 2,
    batch_size: int = 256,
    progress: bool | ProgressMode = False,
) -> list[tuple[int, int, MatchResult]]:
    """A ``play_match`` of every pair ``i < j`` of a pool of named agents.

    Args:
        agents: ``(name, agent)`` pairs; the names only label the progress.
        key: PRNG key; pair number p plays with ``fold_in(key, p)``.
        num_games: games per pair.
        opening_moves, batch_size, progress: as for ``play_match``.

    Returns:
        ``(i, j, result)`` per pair, results from agent i's side.
    """
    pairs = [(i, j) for i in range(len(agents)) for j in range(i + 1, len(agents))]
    results = []
    steps = progress_steps(
        list(enumerate(pairs)), desc="round robin", unit="match", progress=progress,
        label=lambda pair: f"{agents[pair[1][0]][0]} vs {agents[pair[1][1]][0]}",
    )
    for p, (i, j) in steps:
        result = play_match(
            agents[i][1],
            agents[j][1],
            jax.random.fold_in(key, p),
            num_games,
            opening_moves=opening_moves,
            batch_size=batch_size,
        )
        results.append((i, j, result))
    return results


def match_summary(result: MatchResult) -> dict:
    """JSON-friendly summary of a ``MatchResult`` (from agent A's side).

    Returns:
        ``games``, ``wins``/``draws``/``losses`` (counts), ``win_rate``,
        ``win_ci``, ``draw_rate``, ``draw_ci``, ``loss_rate``, ``loss_ci``,
        ``score``, ``score_ci`` (95% Wilson intervals), ``mean_game_length``
        and the same counts split by colour in ``as_first`` / ``as_second``.
    """
    n = result.num_games
    out = {"games": n, "wins": result.wins, "draws": result.draws, "losses": result.losses}
    for key, k in (("win", result.wins), ("draw", result.draws), ("loss", result.losses)):
        rate, ci = rate_with_interval(k, n)
        out[f"{key}_rate"], out[f"{key}_ci"] = rate, list(ci)
    out["score"] = result.score
    out["score_ci"] = list(result.score_ci)
    out["mean_game_length"] = float(np.mean(result.num_moves)) if n else float("nan")
    for label, sel in (("as_first", result.a_first), ("as_second", ~result.a_first)):
        o = result.outcomes[sel]
        out[label] = {
            "games": int(o.size),
            "wins": int(np.sum(o == 1)),
            "draws": int(np.sum(o == 0)),
            "losses": int(np.sum(o == -1)),
        }
    return out


def format_match(summary: dict) -> str:
    """A plain-text table of ``match_summary`` output (with ``a`` and ``b`` names)."""
    lines = [
        f"{summary['a']}  vs  {summary['b']}: {summary['games']} games, colours alternated,"
        + (
            f" every {summary['openings']}-ply opening once per colour"
            if summary.get("every_opening")
            else f" {summary['openings']} random opening plies"
        ),
        "",
        f"{'result for A':<12}  {'games':>5}  {'rate':>6}  95% CI",
    ]
    for label, key in (("wins", "win"), ("draws", "draw"), ("losses", "loss")):
        rate = format_rate(summary[f"{key}_rate"], summary[f"{key}_ci"])
        lines.append(f"{label:<12}  {summary[label]:>5}  {rate}")
    lines.append(f"{'score':<12}  {'':>5}  {format_rate(summary['score'], summary['score_ci'])}")
    first, second = summary["as_first"], summary["as_second"]
    lines += [
        "",
        f"A moving first:  +{first['wins']} ={first['draws']} -{first['losses']}",
        f"A moving second: +{second['wins']} ={second['draws']} -{second['losses']}",
        f"mean game length {summary['mean_game_length']:.1f} plies",
    ]
    return "\n".join(lines)
