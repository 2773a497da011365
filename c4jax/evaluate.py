"""``python -m c4jax.evaluate``: matches, Elo ratings and solver mistake rates.

Usage:
    python -m c4jax.evaluate match runs/X@64 minimax-5 --games 200
    python -m c4jax.evaluate elo runs/X@0 runs/X@64 lookahead mcts-200 --games 100 --plot elo.png
    python -m c4jax.evaluate solver --checkpoint runs/X --sims 0,64,600 --positions 200

Agents are named by a spec (``parse_agent``):

* ``random``: uniformly random legal moves.
* ``lookahead``: win in one, else block, else random.
* ``mcts`` or ``mcts-N``: pure MCTS with random rollouts, N simulations (1000).
* ``minimax`` or ``minimax-K``: depth-K negamax with a heuristic (depth 5).
* ``RUN_DIR[:STEP][@SIMS]``: a training run's network, its best checkpoint
  (or checkpoint STEP) with SIMS search simulations per move (default: the
  run's evaluation setting; ``@0`` = the network alone).

Every subcommand prints a table and, with ``--json PATH``, writes the same
results machine-readably. Bad input (an unknown agent spec, a missing run
directory, a bad list) prints a message naming the problem and exits with
status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

AGENT_FORMS = (
    "random, lookahead, mcts, mcts-N (N simulations >= 1, default 1000), "
    "minimax, minimax-K (depth 1..8, default 5), "
    "or a run directory RUN_DIR[:STEP][@SIMS] (e.g. runs/X, runs/X@64, runs/X:40@0)"
)
DEFAULT_MCTS_SIMULATIONS = 1000
DEFAULT_MINIMAX_DEPTH = 5
MAX_MINIMAX_DEPTH = 8  # 7^8 = 5.8M leaves per game and move: already very slow
DEFAULT_BASELINES = "random,lookahead,mcts-1000,minimax-5"

_RUN_SPEC = re.compile(r"^(?P<path>.+?)(?::(?P<step>[^:@]*))?(?:@(?P<sims>[^@]*))?$")


# --- Agent specs. ---


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec (before anything is loaded).

    ``kind`` is ``random``, ``lookahead``, ``mcts``, ``minimax`` or ``run``;
    ``value`` the simulations (mcts) or depth (minimax); ``run_dir``, ``step``
    and ``sims`` describe a run (``None`` = best checkpoint / the run's setting).
    """

    kind: str
    value: int | None = None
    run_dir: Path | None = None
    step: int | None = None
    sims: int | None = None


def _bad_spec(spec: str, why: str) -> ValueError:
    return ValueError(f"bad agent spec {spec!r}: {why}. Allowed: {AGENT_FORMS}")


def _parse_int(spec: str, text: str, what: str, low: int, high: int | None = None) -> int:
    if not re.fullmatch(r"\d+", text or ""):
        raise _bad_spec(spec, f"{what} {text!r} is not a whole number")
    value = int(text)
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"{low}..{high}"
        raise _bad_spec(spec, f"{what} {value} is out of range ({allowed})")
    return value


def parse_spec(spec: str) -> AgentSpec:
    """Parses an agent spec without loading anything (see the module docstring).

    Raises:
        ValueError: naming the spec, what is wrong and the allowed forms.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise _bad_spec(str(spec), "empty")
    spec = spec.strip()
    kind, dash, arg = spec.partition("-")
    if spec in ("random", "lookahead"):
        return AgentSpec(kind=spec)
    if kind == "mcts" and not Path(spec).exists():
        sims = DEFAULT_MCTS_SIMULATIONS if not dash else _parse_int(spec, arg, "simulations", 1)
        return AgentSpec(kind="mcts", value=sims)
    if kind == "minimax" and not Path(spec).exists():
        depth = (
            DEFAULT_MINIMAX_DEPTH
            if not dash
            else _parse_int(spec, arg, "depth", 1, MAX_MINIMAX_DEPTH)
        )
        return AgentSpec(kind="minimax", value=depth)
    if Path(spec).is_dir():  # a directory whose name happens to contain ':' or '@'
        return AgentSpec(kind="run", run_dir=Path(spec))
    match = _RUN_SPEC.match(spec)
    path, step, sims = match.group("path"), match.group("step"), match.group("sims")
    run_dir = Path(path)
    if not run_dir.is_dir():
        if step is None and sims is None:
            raise _bad_spec(spec, f"not a reference agent, and no run directory {path!r}")
        raise _bad_spec(spec, f"no run directory {path!r}")
    return AgentSpec(
        kind="run",
        run_dir=run_dir,
        step=None if step is None else _parse_int(spec, step, "checkpoint step", 0),
        sims=None if sims is None else _parse_int(spec, sims, "simulations", 0),
    )


@functools.lru_cache(maxsize=8)
def load_run(run_dir: str, step: int | None) -> tuple:
    """``(config, variables, step)`` of a run's checkpoint (default its best).

    Cached, so that several agents from one run (``runs/X@0``, ``runs/X@64``)
    load it once.

    Raises:
        ValueError: not a run directory, no checkpoint, or no such step.
    """
    from c4jax import player, trainer

    config, state = player.load_checkpoint(Path(run_dir), step=step)
    return config, trainer.Trainer.variables(state), int(state.step)


def run_player(run_dir: str | Path, *, step: int | None = None, sims: int | None = None):
    """``(name, Player)`` for a run's checkpoint; the name is ``RUN_DIR:STEP@SIMS``.

    Cached: the same spec gives the same ``Player``, so its agent ``act`` is
    the same object and compiled matches and solver calls are reused.

    Raises:
        ValueError: see ``load_run``.
    """
    return _run_player(str(run_dir), step, sims)


@functools.lru_cache(maxsize=16)
def _run_player(run_dir: str, step: int | None, sims: int | None):
    from c4jax.player import Player

    config, variables, step = load_run(run_dir, step)
    sims = config.eval.num_simulations if sims is None else sims
    player = Player(config, variables, num_simulations=sims)
    return f"{run_dir}:{step}@{sims}", player


def _short(err: Exception, limit: int = 600) -> str:
    """The message of ``err``, cut to ``limit`` characters (Orbax's can be pages long)."""
    text = str(err)
    return text if len(text) <= limit else text[:limit] + " ..."


def parse_agent(spec: str) -> tuple[str, Callable]:
    """``(name, agent)`` for an agent spec; the agent is ``act(key, state[B]) -> [B]``.

    Names are normalised: ``mcts`` -> ``mcts-1000``, ``runs/X`` ->
    ``runs/X:STEP@SIMS`` with the checkpoint step and simulations used.

    Raises:
        ValueError: naming the spec, what is wrong and the allowed forms (also
            when a run directory holds no usable checkpoint).
    """
    from c4jax import agents

    parsed = parse_spec(spec)
    if parsed.kind == "random":
        return "random", agents.random_agent
    if parsed.kind == "lookahead":
        return "lookahead", agents.lookahead_agent
    if parsed.kind == "mcts":
        return f"mcts-{parsed.value}", agents.make_mcts_agent(parsed.value)
    if parsed.kind == "minimax":
        return f"minimax-{parsed.value}", agents.make_minimax_agent(parsed.value)
    try:
        name, player = run_player(parsed.run_dir, step=parsed.step, sims=parsed.sims)
    except ValueError as err:
        raise ValueError(f"agent spec {spec!r}: {_short(err)}") from None
    return name, player.act


def parse_agents(specs: Sequence[str]) -> list[tuple[str, Callable]]:
    """``parse_agent`` of each spec; raises ValueError on a bad one or a repeated name."""
    out = []
    seen = {}
    for spec in specs:
        name, agent = parse_agent(spec)
        if name in seen:
            raise ValueError(f"agent {name!r} is listed twice ({seen[name]!r} and {spec!r})")
        seen[name] = spec
        out.append((name, agent))
    return out


def _split_list(text: str, what: str) -> list[str]:
    items = [s.strip() for s in text.split(",")]
    items = [s for s in items if s]
    if len(set(items)) != len(items):
        raise ValueError(f"{what}: {text!r} repeats an entry")
    return items


def parse_sims(text: str) -> list[int]:
    """``"0,64,600"`` -> ``[0, 64, 600]``; raises ValueError naming a bad entry."""
    items = _split_list(text, "--sims")
    if not items:
        raise ValueError(f"--sims: {text!r} lists no simulation counts (e.g. 0,64,600)")
    for item in items:
        if not re.fullmatch(r"\d+", item):
            raise ValueError(f"--sims: {item!r} is not a whole number >= 0 (e.g. --sims 0,64,600)")
    return [int(s) for s in items]


def parse_sets(text: str) -> list[str]:
    """``"L1_R1,L2_R2"`` -> the set names; raises ValueError naming an unknown set."""
    from c4jax import solver

    items = _split_list(text, "--sets")
    if not items:
        raise ValueError(f"--sets: {text!r} lists no sets; allowed: {', '.join(solver.SET_NAMES)}")
    for item in items:
        if item not in solver.SET_NAMES:
            raise ValueError(
                f"--sets: unknown set {item!r}; allowed: {', '.join(solver.SET_NAMES)}"
            )
    return items


# --- Matches. ---


def _rate(k: int, n: int) -> dict:
    from c4jax.arena import wilson_interval

    return {"rate": k / n if n else float("nan"), "ci": list(wilson_interval(k, n))}


def match_summary(result) -> dict:
    """JSON-friendly summary of an ``arena.MatchResult`` (from agent A's side).

    Returns:
        ``games``, ``wins``/``draws``/``losses`` (counts), ``win_rate``,
        ``win_ci``, ``draw_rate``, ``draw_ci``, ``loss_rate``, ``loss_ci``,
        ``score``, ``score_ci`` (95% Wilson intervals), ``mean_game_length``
        and the same counts split by colour in ``as_first`` / ``as_second``.
    """
    import numpy as np

    n = result.num_games
    out = {"games": n, "wins": result.wins, "draws": result.draws, "losses": result.losses}
    for key, k in (("win", result.wins), ("draw", result.draws), ("loss", result.losses)):
        r = _rate(k, n)
        out[f"{key}_rate"], out[f"{key}_ci"] = r["rate"], r["ci"]
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


def play_match(
    agent_a: Callable,
    agent_b: Callable,
    key,
    num_games: int,
    *,
    opening_moves: int = 2,
    batch_size: int = 256,
    progress: bool = False,
    desc: str | None = None,
):
    """``arena.play_games`` in equal chunks of at most ``batch_size`` games.

    Chunks share one compiled match; the few surplus games of the last chunk
    are dropped, so exactly ``num_games`` games count (colours alternated).

    Returns:
        An ``arena.MatchResult`` over all games.
    """
    import jax
    import numpy as np
    from tqdm import tqdm

    from c4jax import arena

    if num_games < 1:
        raise ValueError(f"--games: got {num_games}, allowed: >= 1")
    num_chunks = math.ceil(num_games / max(2, batch_size))
    size = math.ceil(num_games / num_chunks)
    size += size % 2  # whole pairs per chunk
    parts = []
    for c in tqdm(range(num_chunks), desc=desc, disable=not progress, leave=False, unit="chunk"):
        parts.append(
            arena.play_games(
                agent_a, agent_b, jax.random.fold_in(key, c), size, opening_moves=opening_moves
            )
        )
    outcomes = np.concatenate([p.outcomes for p in parts])[:num_games]
    a_first = np.concatenate([p.a_first for p in parts])[:num_games]
    moves = np.concatenate([p.num_moves for p in parts])[:num_games]
    return arena.MatchResult.from_games(outcomes, a_first, moves)


def _pct(rate: float, ci: Sequence[float]) -> str:
    return f"{100 * rate:5.1f}%  [{100 * ci[0]:5.1f}, {100 * ci[1]:5.1f}]"


def format_match(summary: dict) -> str:
    """A plain-text table of ``match_summary`` output (with ``a`` and ``b`` names)."""
    lines = [
        f"{summary['a']}  vs  {summary['b']}: {summary['games']} games, colours alternated,"
        f" {summary['openings']} random opening plies",
        "",
        f"{'result for A':<12}  {'games':>5}  {'rate':>6}  95% CI",
    ]
    for label, key, count in (
        ("wins", "win", "wins"),
        ("draws", "draw", "draws"),
        ("losses", "loss", "losses"),
    ):
        rate = _pct(summary[f"{key}_rate"], summary[f"{key}_ci"])
        lines.append(f"{label:<12}  {summary[count]:>5}  {rate}")
    lines.append(f"{'score':<12}  {'':>5}  {_pct(summary['score'], summary['score_ci'])}")
    first, second = summary["as_first"], summary["as_second"]
    lines += [
        "",
        f"A moving first:  +{first['wins']} ={first['draws']} -{first['losses']}",
        f"A moving second: +{second['wins']} ={second['draws']} -{second['losses']}",
        f"mean game length {summary['mean_game_length']:.1f} plies",
    ]
    return "\n".join(lines)


def run_match(args) -> dict:
    import jax

    if args.games < 1:
        raise ValueError(f"--games: got {args.games}, allowed: >= 1")
    _check_openings(args.openings)
    (name_a, agent_a), (name_b, agent_b) = parse_agent(args.a), parse_agent(args.b)
    start = time.perf_counter()
    result = play_match(
        agent_a,
        agent_b,
        jax.random.key(args.seed),
        args.games,
        opening_moves=args.openings,
        batch_size=args.batch_size,
        progress=True,
        desc=f"{name_a} vs {name_b}",
    )
    summary = {
        "a": name_a,
        "b": name_b,
        "openings": args.openings,
        "seed": args.seed,
        **match_summary(result),
        "seconds": time.perf_counter() - start,
    }
    print(format_match(summary))
    return summary


def _check_openings(openings: int) -> None:
    if not 0 <= openings <= 20:
        raise ValueError(f"--openings: got {openings}, allowed: 0..20 random opening plies")


# --- Elo. ---


def run_elo(args) -> dict:
    import jax
    import numpy as np
    from tqdm import tqdm

    from c4jax import elo

    if args.games < 1:
        raise ValueError(f"--games: got {args.games}, allowed: >= 1")
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap: got {args.bootstrap}, allowed: >= 0")
    _check_openings(args.openings)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise ValueError(f"--plot: {str(args.plot)!r} must be a .png file")
    pool = parse_agents(args.agents)
    if "random" not in [name for name, _ in pool]:
        pool.insert(0, parse_agent("random"))
    if len(pool) < 2:
        raise ValueError("elo: give at least one agent besides random")
    names = [name for name, _ in pool]
    num = len(names)
    wins = np.zeros((num, num), np.int64)
    draws = np.zeros((num, num), np.int64)
    pairs = [(i, j) for i in range(num) for j in range(i + 1, num)]
    key = jax.random.key(args.seed)
    matches = []
    start = time.perf_counter()
    bar = tqdm(pairs, desc="round robin", unit="match")
    for p, (i, j) in enumerate(bar):
        bar.set_postfix_str(f"{names[i]} vs {names[j]}")
        result = play_match(
            pool[i][1],
            pool[j][1],
            jax.random.fold_in(key, p),
            args.games,
            opening_moves=args.openings,
            batch_size=args.batch_size,
        )
        elo.add_match(wins, draws, i, j, result)
        matches.append({"a": names[i], "b": names[j], **match_summary(result)})
    bar.close()
    rated = elo.rate(names, wins, draws, num_bootstrap=args.bootstrap, seed=args.seed)
    print(rated.table())
    print()
    print(_format_crosstable(names, rated.points, rated.games))
    summary = {
        "players": names,
        "anchor": rated.anchor,
        "ratings": {
            name: {
                "elo": float(rated.ratings[k]),
                "ci": [float(rated.ci_low[k]), float(rated.ci_high[k])],
                "games": int(rated.games[k].sum()),
                "score": float(rated.points[k].sum() / rated.games[k].sum()),
            }
            for k, name in enumerate(names)
        },
        "games_per_pair": args.games,
        "openings": args.openings,
        "bootstrap": args.bootstrap,
        "seed": args.seed,
        "wins": wins.tolist(),
        "draws": draws.tolist(),
        "matches": matches,
        "seconds": time.perf_counter() - start,
    }
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        elo.plot(rated, args.plot)
        print(f"plot written to {args.plot}")
        summary["plot"] = str(args.plot)
    return summary


def _format_crosstable(names, points, games) -> str:
    """Score % of each row player against each column player (``-`` on the diagonal)."""
    width = max(len(n) for n in names)
    tags = [f"#{k + 1}" for k in range(len(names))]
    lines = ["score % of row vs column:", " " * (width + 5) + "".join(f"{t:>7}" for t in tags)]
    for k, name in enumerate(names):
        cells = "".join(
            f"{100 * points[k, j] / games[k, j]:>7.1f}" if games[k, j] else f"{'-':>7}"
            for j in range(len(names))
        )
        lines.append(f"{tags[k]:>3}  {name:<{width}}" + cells)
    return "\n".join(lines)


# --- Solver mistake rates. ---


def format_solver(results: dict[str, dict[str, dict]]) -> str:
    """Per-set tables (agents ordered by mistake rate) with 95% Wilson intervals.

    Args:
        results: ``{agent name: {set name: solver.summarize(...) dict}}``.
    """
    sets = list(dict.fromkeys(s for r in results.values() for s in r))
    width = max(6, *(len(a) for a in results))
    header = (
        f"  {'agent':<{width}}  {'mistakes, all':>22}  {'mistakes, non-trivial':>22}"
        f"  {'exact best move':>22}"
    )
    blocks = []
    for s in sets:
        rows = [(a, r[s]) for a, r in results.items() if s in r]
        rows.sort(key=lambda item: item[1]["mistake_rate"])
        first = rows[0][1]
        title = (
            f"{s}: {first['positions']} positions, {first['nontrivial']} non-trivial"
            " (rates in %, 95% Wilson intervals; fewer mistakes first)"
        )
        lines = [title, header]
        for a, r in rows:
            lines.append(
                f"  {a:<{width}}  {_pct(r['mistake_rate'], r['mistake_ci']):>22}"
                f"  {_pct(r['nontrivial_mistake_rate'], r['nontrivial_mistake_ci']):>22}"
                f"  {_pct(r['exact_best_rate'], r['exact_best_ci']):>22}"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _parse_checkpoint(text: str) -> AgentSpec:
    """``RUN_DIR[:STEP]`` -> its ``AgentSpec``; raises ValueError otherwise."""
    try:
        run = parse_spec(text)
    except ValueError:
        run = None
    if run is None or run.kind != "run" or run.sims is not None:
        raise ValueError(
            f"--checkpoint: {text!r} is not a run directory; give RUN_DIR or RUN_DIR:STEP"
            " (simulations go in --sims)"
        )
    return run


def run_solver(args) -> dict:
    import jax
    from tqdm import tqdm

    from c4jax import solver

    sets = parse_sets(args.sets)
    if args.positions is not None and args.positions < 1:
        raise ValueError(f"--positions: got {args.positions}, allowed: >= 1")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size: got {args.batch_size}, allowed: >= 1")
    pool = parse_agents(_split_list(args.baselines, "--baselines"))
    if args.checkpoint is not None:
        run = _parse_checkpoint(args.checkpoint)
        for sims in parse_sims(args.sims):
            try:
                name, player = run_player(run.run_dir, step=run.step, sims=sims)
            except ValueError as err:
                raise ValueError(f"--checkpoint: {_short(err)}") from None
            pool.append((name, player.act))
    elif args.sims_given:
        raise ValueError("--sims needs --checkpoint RUN_DIR")
    if not pool:
        raise ValueError("nothing to evaluate: give --checkpoint RUN_DIR and/or --baselines")
    key = jax.random.key(args.seed)
    results: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    jobs = [(name, agent, s) for name, agent in pool for s in sets]
    bar = tqdm(jobs, desc="solver sets", unit="set")
    for name, agent, s in bar:
        bar.set_postfix_str(f"{name} on {s}")
        start = time.perf_counter()
        out = solver.evaluate_agent(
            agent,
            jax.random.fold_in(key, solver.SET_NAMES.index(s)),
            [s],
            args.positions,
            batch_size=args.batch_size,
        )
        results.setdefault(name, {}).update(out)
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
    bar.close()
    print(format_solver(results))
    print()
    print("Summary: mistake % over all / non-trivial positions")
    print(solver.format_table(results))
    print("\nseconds per agent: " + ", ".join(f"{a} {t:.1f}" for a, t in seconds.items()))
    return {
        "sets": sets,
        "positions": args.positions,
        "seed": args.seed,
        "agents": list(results),
        "results": results,
        "seconds": seconds,
    }


# --- Command line. ---


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (default 0)")
    p.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write results here"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``python -m c4jax.evaluate``."""
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.evaluate",
        description="Evaluate Connect Four agents: matches, Elo ratings, solver mistake rates.",
        epilog=f"Agent specs: {AGENT_FORMS}.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    match = sub.add_parser(
        "match",
        help="a match between two agents",
        description="Batched games of agent A against agent B, colours alternated, each pair"
        " of games from the same random opening; wins, draws and losses of A with 95% Wilson"
        f" intervals. Agent specs: {AGENT_FORMS}.",
    )
    match.add_argument("a", help="agent A (results are from its side)")
    match.add_argument("b", help="agent B")
    match.add_argument("--games", type=int, default=100, help="games to play (default 100)")
    match.add_argument(
        "--openings",
        type=int,
        default=2,
        metavar="K",
        help="uniformly random plies before the agents take over, shared by both games of a"
        " colour-swapped pair, so that deterministic agents play varied games (default 2)",
    )
    match.add_argument(
        "--batch-size", type=int, default=256, help="games played at once (default 256)"
    )
    _add_common(match)

    elo_p = sub.add_parser(
        "elo",
        help="round robin and Bradley-Terry ratings",
        description="Round robin over a pool of agents (random is added if missing) and"
        " maximum-likelihood Bradley-Terry ratings on the Elo scale, random = 0, with"
        f" bootstrap 95%% intervals. Agent specs: {AGENT_FORMS}.",
    )
    elo_p.add_argument("agents", nargs="+", metavar="AGENT")
    elo_p.add_argument("--games", type=int, default=100, help="games per pair (default 100)")
    elo_p.add_argument("--openings", type=int, default=2, metavar="K", help="see match (default 2)")
    elo_p.add_argument("--bootstrap", type=int, default=1000, metavar="R", help="resamples (1000)")
    elo_p.add_argument("--plot", type=Path, default=None, metavar="PATH.png", help="ratings chart")
    elo_p.add_argument("--batch-size", type=int, default=256, help="games played at once (256)")
    _add_common(elo_p)

    solver_p = sub.add_parser(
        "solver",
        help="mistake rates on solver-labelled positions",
        description="Per Pons set: mistake rate over all and over non-trivial positions and"
        " exact-best-move rate, with 95% Wilson intervals, for a checkpoint at several"
        " simulation counts and for reference agents.",
    )
    solver_p.add_argument(
        "--checkpoint",
        default=None,
        metavar="RUN_DIR[:STEP]",
        help="a run directory (its best checkpoint, or checkpoint STEP)",
    )
    solver_p.add_argument(
        "--sims",
        default=None,
        help="simulation counts for the checkpoint, 0 = network alone (default 0,64,600)",
    )
    solver_p.add_argument(
        "--sets", default="L3_R1,L2_R1,L2_R2,L1_R1,L1_R2,L1_R3", help="sets (default all six)"
    )
    solver_p.add_argument("--positions", type=int, default=None, help="first N of each set (all)")
    solver_p.add_argument(
        "--baselines", default=DEFAULT_BASELINES, help=f"agent specs (default {DEFAULT_BASELINES})"
    )
    solver_p.add_argument(
        "--batch-size", type=int, default=250, help="positions per agent call (default 250)"
    )
    _add_common(solver_p)
    return parser


def _to_json(x):
    """JSON-safe copy: tuples to lists, NaN and infinities to None, numpy to Python."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_to_json(v) for v in x]
    if isinstance(x, np.ndarray):
        return _to_json(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def quiet_orbax_logs() -> None:
    """Hides Orbax's absl warnings about read-only checkpoint managers (CLI only)."""
    import absl.logging

    absl.logging.set_verbosity(absl.logging.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (2 for bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet_orbax_logs()
    if args.command == "solver":
        args.sims_given = args.sims is not None
        args.sims = "0,64,600" if args.sims is None else args.sims
    runners = {"match": run_match, "elo": run_elo, "solver": run_solver}
    try:
        if args.json is not None and args.json.is_dir():
            raise ValueError(f"--json: {str(args.json)!r} is a directory; give a file path")
        summary = runners[args.command](args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_to_json({"command": args.command, **summary}), indent=1))
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
