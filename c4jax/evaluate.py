"""``python -m c4jax.evaluate``: matches, Elo ratings and solver mistake rates.

Usage:
    python -m c4jax.evaluate match runs/X@64 minimax-5 --games 200
    python -m c4jax.evaluate elo runs/X@0 runs/X@64 lookahead mcts-200 --games 100 --plot elo.png
    python -m c4jax.evaluate solver --checkpoint runs/X --sims 0,64,600 --positions 200

Agents are named by the specs of ``c4jax.judge.registry`` (``--help`` lists
them). A run named without a checkpoint step plays its best checkpoint by
evaluation score, and a line says which iteration that is (``runs/X:last``
plays the newest). Every subcommand prints a table and, with ``--json PATH``,
writes the same results machine-readably. Progress is a bar on a terminal and
one line per step otherwise (on stderr). Bad input (an unknown agent spec, a
missing run directory, a bad list) prints a message naming the problem and
exits with status 2.

This module only parses arguments and prints; the work is in ``c4jax.judge``.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads: Ctrl-C anywhere is a short message and 130
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted.")

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from c4jax.judge import arena, elo, perfect, registry, solver
from c4jax.run import cli, xla_flags
from c4jax.store import checkpoints

DEFAULT_BASELINES = "random,lookahead,mcts-1000,minimax-5"


# --- Lists on the command line. ---


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
    items = _split_list(text, "--sets")
    allowed = ", ".join(solver.SET_NAMES)
    if not items:
        raise ValueError(f"--sets: {text!r} lists no sets; allowed: {allowed}")
    for item in items:
        if item not in solver.SET_NAMES:
            raise ValueError(f"--sets: unknown set {item!r}; allowed: {allowed}")
    return items


def _check_openings(openings: int) -> None:
    if not 0 <= openings <= 20:
        raise ValueError(f"--openings: got {openings}, allowed: 0..20 random opening plies")


def _parse_checkpoint(text: str) -> registry.AgentSpec:
    """``RUN_DIR[:STEP]`` (STEP: an iteration, last or best) -> its ``AgentSpec``;
    raises ValueError otherwise."""
    try:
        run = registry.parse_spec(text)
    except ValueError:
        run = None
    if run is None or run.kind != "run" or run.sims is not None:
        raise ValueError(
            f"--checkpoint: {text!r} is not a run directory; give RUN_DIR or RUN_DIR:STEP"
            " (STEP: an iteration, last or best; simulations go in --sims)"
        )
    return run


def _tell(line: str) -> None:
    """Prints which checkpoint a run spec chose (``registry.make_agent``'s ``tell``)."""
    print(line, flush=True)


# --- JSON output. ---


def _to_json(x):
    """JSON-safe copy: tuples to lists, NaN and infinities to None, numpy to Python."""
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


# --- The subcommands. ---


def run_match(args) -> dict:
    if args.every_opening:
        try:
            args.games = 2 * arena.num_exhaustive_openings(args.openings)
        except ValueError as err:
            raise ValueError(f"--every-opening with --openings: {err}") from None
    if args.games < 1:
        raise ValueError(f"--games: got {args.games}, allowed: >= 1")
    _check_openings(args.openings)
    told: list[str] = []  # runs/X@0 against runs/X@64: one line

    def tell(line: str) -> None:
        if line not in told:
            told.append(line)
            _tell(line)

    name_a, agent_a = registry.make_agent(args.a, tell=tell)
    name_b, agent_b = registry.make_agent(args.b, tell=tell)
    judge = perfect.make_move_judge() if args.judge else None
    start = time.perf_counter()
    result = arena.play_match(
        agent_a,
        agent_b,
        jax.random.key(args.seed),
        args.games,
        opening_moves=args.openings,
        batch_size=args.batch_size,
        progress=True,
        desc=f"{name_a} vs {name_b}",
        observer=judge,
        every_opening=args.every_opening,
    )
    summary = {
        "a": name_a,
        "b": name_b,
        "openings": args.openings,
        "every_opening": args.every_opening,
        "seed": args.seed,
        **arena.match_summary(result),
        "seconds": time.perf_counter() - start,
    }
    print(arena.format_match(summary))
    if judge is not None:
        summary["judged"] = judge.summary()
        print(f"{name_a}'s {len(judge)} moves in these games, judged by the perfect solver:")
        print(solver.format_report({name_a: {"played": summary["judged"]}}))
    return summary


def run_elo(args) -> dict:
    if args.games < 1:
        raise ValueError(f"--games: got {args.games}, allowed: >= 1")
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap: got {args.bootstrap}, allowed: >= 0")
    _check_openings(args.openings)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise ValueError(f"--plot: {str(args.plot)!r} must be a .png file")
    pool = registry.make_agents(args.agents, tell=_tell)
    if "random" not in [name for name, _ in pool]:
        pool.insert(0, registry.make_agent("random"))
    if len(pool) < 2:
        raise ValueError("elo: give at least one agent besides random")
    names = [name for name, _ in pool]
    start = time.perf_counter()
    played = arena.round_robin(
        pool,
        jax.random.key(args.seed),
        args.games,
        opening_moves=args.openings,
        batch_size=args.batch_size,
        progress=True,
    )
    wins = np.zeros((len(names), len(names)), np.int64)
    draws = np.zeros_like(wins)
    matches = []
    for i, j, result in played:
        elo.add_match(wins, draws, i, j, result)
        matches.append({"a": names[i], "b": names[j], **arena.match_summary(result)})
    rated = elo.rate(names, wins, draws, num_bootstrap=args.bootstrap, seed=args.seed)
    print(rated.table())
    print()
    print(elo.crosstable(names, rated.points, rated.games))
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


def run_solver(args) -> dict:
    sets = parse_sets(args.sets)
    if args.positions is not None and args.positions < 1:
        raise ValueError(f"--positions: got {args.positions}, allowed: >= 1")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size: got {args.batch_size}, allowed: >= 1")
    pool = registry.make_agents(_split_list(args.baselines, "--baselines"), tell=_tell)
    if args.checkpoint is not None:
        run = _parse_checkpoint(args.checkpoint)
        for k, sims in enumerate(parse_sims(args.sims)):
            tell = _tell if k == 0 else None  # one line for the run
            try:
                named = registry.make_run_agent(run.run_dir, step=run.step, sims=sims, tell=tell)
            except ValueError as err:
                raise ValueError(f"--checkpoint: {registry.short_error(err)}") from None
            pool.append(named)
    elif args.sims_given:
        raise ValueError("--sims needs --checkpoint RUN_DIR")
    if not pool:
        raise ValueError("nothing to evaluate: give --checkpoint RUN_DIR and/or --baselines")
    key = jax.random.key(args.seed)
    results: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    jobs = [(name, agent, s) for name, agent in pool for s in sets]
    steps = arena.progress_steps(
        jobs, desc="solver", unit="set", label=lambda job: f"{job[0]} on {job[2]}"
    )
    for name, agent, s in steps:
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
    print(solver.format_report(results))
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


# --- The parser. ---


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (default 0)")
    p.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write results here"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``python -m c4jax.evaluate``."""
    forms = registry.AGENT_FORMS
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.evaluate",
        description="Evaluate Connect Four agents: matches, Elo ratings, solver mistake rates.",
        epilog=f"Agent specs:\n{registry.describe()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    match = sub.add_parser(
        "match",
        help="a match between two agents",
        description="Batched games of agent A against agent B, colours alternated, each pair"
        " of games from the same random opening; wins, draws and losses of A with 95% Wilson"
        f" intervals. Agent specs: {forms}.",
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
        "--every-opening",
        action="store_true",
        help="play every K-ply opening (K = --openings <= 4) once in each colour instead of"
        " random ones: 2 x 7^K games (98 for K = 2), whatever --games says",
    )
    match.add_argument(
        "--batch-size", type=int, default=256, help="games played at once (default 256)"
    )
    match.add_argument(
        "--judge",
        action="store_true",
        help="also judge every move of A in these games with the perfect solver (mistake"
        " rate on the positions A actually meets; needs the [solver] extra)",
    )
    _add_common(match)

    elo_p = sub.add_parser(
        "elo",
        help="round robin and Bradley-Terry ratings",
        description="Round robin over a pool of agents (random is added if missing) and"
        " maximum-likelihood Bradley-Terry ratings on the Elo scale, random = 0, with"
        f" bootstrap 95% intervals. Agent specs: {forms}.",
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
        help="a run directory: its best checkpoint by evaluation score (the iteration is"
        " printed), or STEP: an iteration, last (the newest checkpoint) or best",
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


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (2 for bad input)."""
    xla_flags.enable_fast_cpu()  # before the first device query
    parser = build_parser()
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()
    cli.one_line_warnings()
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
