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
missing run directory, a bad list, a number out of its bounds) prints one
``error:`` line naming the problem and exits with status 2. Every number is
ASCII digits within the bounds its ``--help`` states (``c4jax.inputs``):
simulations at most ``inputs.MAX_SIMULATIONS`` (in ``--sims`` and in agent
specs). ``--json`` and ``--plot`` are checked before anything is evaluated: a
path that cannot be written is an ``error:`` line (status 2) before the work,
not a traceback after it; the files are written whole or not at all, and a disk
that fills up meanwhile is an ``error:`` line and status 74 (``EX_IOERR``), the
results having been printed.

This module only parses arguments and prints; the work is in ``c4jax.judge``.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads: Ctrl-C anywhere is a short message and 130
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted.")

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from c4jax import inputs
from c4jax.judge import arena, elo, perfect, registry, solver
from c4jax.run import cli, compile_cache, xla_flags
from c4jax.store import checkpoints, outputs

DEFAULT_BASELINES = "random,lookahead,mcts-1000,minimax-5"

# The bounds of the numbers typed on this command line (simulations: inputs.MAX_SIMULATIONS).
MAX_GAMES = 1_000_000  # --games: per match, or per pair in elo
MAX_OPENINGS = arena.MAX_OPENING_MOVES  # --openings: random plies before the agents take over
MAX_BATCH_SIZE = 16_384  # --batch-size: games or positions at once (memory grows with it)
MAX_POSITIONS = 1_000_000  # --positions: the first N of each set (a set has about 1000)
MAX_SEED = inputs.MAX_SEED  # --seed: a 32-bit PRNG seed


_NOT_SAVED = "; the results are printed above, not saved"


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
    bound = inputs.allowed(0, inputs.MAX_SIMULATIONS)
    for item in items:
        if not set(item) <= set("0123456789"):
            raise ValueError(
                f"--sims: {inputs.shown(item)} is not a whole number {bound} (e.g. --sims 0,64,600)"
            )
    sims = [inputs.parse_count(s, name="--sims", low=0, high=inputs.MAX_SIMULATIONS) for s in items]
    repeated = sorted({n for n in sims if sims.count(n) > 1})
    if repeated:
        raise ValueError(f"--sims: {text!r} repeats {repeated[0]} simulations")
    return sims


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


def _parse_checkpoint(text: str) -> registry.AgentSpec:
    """``RUN_DIR[:STEP]`` (STEP: an iteration, last or best) -> its ``AgentSpec``;
    raises ValueError otherwise."""
    try:
        run = registry.parse_spec(text)
    except ValueError:
        run = None
    if run is not None and run.kind == "dqn":
        raise ValueError(_value_based(text))
    if run is None or run.kind != "run" or run.sims is not None:
        raise ValueError(
            f"--checkpoint: {text!r} is not a run directory; give RUN_DIR or RUN_DIR:STEP"
            " (STEP: an iteration, last or best; simulations go in --sims)"
        )
    return run


def _value_based(text: str) -> str:
    return (f"--checkpoint: {inputs.shown(text)} is a value-based run, which does not search:"
            " give it in --baselines")


def _checkpoint_agent(run: registry.AgentSpec, text: str, sims: int, tell):
    """The ``--checkpoint`` agent with ``sims`` simulations: a run's checkpoint, or a
    network written by ``python -m c4jax.export network`` (one step, no :STEP)."""
    from c4jax.dqn.config import is_dqn_run
    from c4jax.store import exported

    if is_dqn_run(run.run_dir):
        raise ValueError(_value_based(text))
    if exported.is_exported(run.run_dir):
        if run.step is not None:
            raise ValueError(f"--checkpoint: {inputs.shown(text)} is an exported network,"
                             " which holds one step: drop :STEP")
        return registry.make_exported_agent(run.run_dir, sims=sims)
    return registry.make_run_agent(run.run_dir, step=run.step, sims=sims, tell=tell)


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
        summary["judged_by_stage"] = judge.by_stage()
        print(f"Where {name_a}'s mistakes fell (stones on the board before the move) "
              "and what each gave away:")
        print(solver.format_stages(summary["judged_by_stage"]))
        if args.every_opening:
            kept = perfect.kept_results(result.outcomes, result.a_first, args.openings)
            summary["kept_result"] = {"kept": int(kept.sum()), "games": int(kept.size)}
            print(f"{name_a} ended {kept.sum()} of {kept.size} games with at least the "
                  "game-theoretic result its side had after the opening (a perfect "
                  "player: all).")
    return summary


def run_elo(args) -> dict:
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
    rated = elo.rate(names, wins, draws)
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
        "intervals": f"{100 * rated.level:g}% profile likelihood",
        "seed": args.seed,
        "wins": wins.tolist(),
        "draws": draws.tolist(),
        "matches": matches,
        "seconds": time.perf_counter() - start,
    }
    if args.plot is not None:
        outputs.write_output(
            args.plot, lambda tmp: elo.plot(rated, tmp), name="--plot", note=_NOT_SAVED
        )
        print(f"plot written to {args.plot}")
        summary["plot"] = str(args.plot)
    return summary


def run_solver(args) -> dict:
    sets = parse_sets(args.sets)
    pool = registry.make_agents(_split_list(args.baselines, "--baselines"), tell=_tell)
    if args.checkpoint is not None:
        run = _parse_checkpoint(args.checkpoint)
        for k, sims in enumerate(parse_sims(args.sims)):
            tell = _tell if k == 0 else None  # one line for the run
            try:
                named = _checkpoint_agent(run, args.checkpoint, sims, tell)
            except ValueError as err:
                message = registry.short_error(err)
                raise ValueError(message if message.startswith("--checkpoint: ")
                                 else f"--checkpoint: {message}") from None
            if named.name in [name for name, _ in pool]:
                raise ValueError(
                    f"agent {named.name!r} is given twice: by --baselines and by "
                    f"--checkpoint with --sims {sims}")
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


def _count(name: str, low: int, high: int):
    """``inputs.count_arg``: an argparse ``type`` for a whole number ``low..high``."""
    return inputs.count_arg(name, low=low, high=high)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seed", type=_count("--seed", 0, MAX_SEED), default=0,
        help=f"PRNG seed, 0-{MAX_SEED} (default 0)",
    )
    p.add_argument(
        "--json", type=Path, default=None, metavar="PATH",
        help="also write results here (checked before the evaluation starts)",
    )


def _add_batch_size(p: argparse.ArgumentParser, default: int, what: str, low: int = 1) -> None:
    p.add_argument(
        "--batch-size", type=_count("--batch-size", low, MAX_BATCH_SIZE), default=default,
        help=f"{what} at once, {low}-{MAX_BATCH_SIZE} (default {default})",
    )


def _add_openings(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument(
        "--openings", type=_count("--openings", 0, MAX_OPENINGS), default=2, metavar="K",
        help=help_text,
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``python -m c4jax.evaluate``."""
    forms = registry.AGENT_FORMS
    parser = cli.OneLineParser(
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
    match.add_argument(
        "--games", type=_count("--games", 1, MAX_GAMES), default=100,
        help=f"games to play, 1-{MAX_GAMES} (default 100)",
    )
    _add_openings(
        match,
        f"uniformly random plies before the agents take over, 0-{MAX_OPENINGS}, none of them"
        " winning, shared by both games of a colour-swapped pair, so that deterministic agents"
        " play varied games (default 2)",
    )
    match.add_argument(
        "--every-opening",
        action="store_true",
        help="play every K-ply opening (K = --openings <= 4) once in each colour instead of"
        " random ones: 2 x 7^K games (98 for K = 2), whatever --games says",
    )
    _add_batch_size(match, 256, "games played", low=2)
    match.add_argument(
        "--judge",
        action="store_true",
        help="also judge every move of A in these games with the perfect solver (mistake"
        " rate on the positions A actually meets; needs the [solver] extra); with"
        " --every-opening, also the games in which A kept the result its side had after"
        " the opening",
    )
    _add_common(match)

    elo_p = sub.add_parser(
        "elo",
        help="round robin and Bradley-Terry ratings",
        description="Round robin over a pool of agents (random is added if missing) and"
        " Bradley-Terry ratings on the Elo scale, random = 0 (maximum likelihood with one"
        " virtual draw per pair, so that a perfect score has a finite rating: 100-0 is about"
        f" +920), with 95% profile-likelihood intervals. Agent specs: {forms}.",
    )
    elo_p.add_argument("agents", nargs="+", metavar="AGENT")
    elo_p.add_argument(
        "--games", type=_count("--games", 1, MAX_GAMES), default=100,
        help=f"games per pair, 1-{MAX_GAMES} (default 100)",
    )
    _add_openings(elo_p, f"see match, 0-{MAX_OPENINGS} (default 2)")
    elo_p.add_argument(
        "--plot", type=Path, default=None, metavar="PATH.png",
        help="ratings chart (checked before the evaluation starts)",
    )
    _add_batch_size(elo_p, 256, "games played", low=2)
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
        " printed), or STEP: an iteration, last (the newest checkpoint) or best; or a"
        " folder written by python -m c4jax.export network",
    )
    solver_p.add_argument(
        "--sims",
        default=None,
        help=f"simulation counts for the checkpoint, each 0-{inputs.MAX_SIMULATIONS}, 0 ="
        " network alone (default 0,64,600)",
    )
    solver_p.add_argument(
        "--sets", default="L3_R1,L2_R1,L2_R2,L1_R1,L1_R2,L1_R3", help="sets (default all six)"
    )
    solver_p.add_argument(
        "--positions", type=_count("--positions", 1, MAX_POSITIONS), default=None,
        help=f"the first N of each set, 1-{MAX_POSITIONS} (default all)",
    )
    solver_p.add_argument(
        "--baselines", default=DEFAULT_BASELINES, help=f"agent specs (default {DEFAULT_BASELINES})"
    )
    _add_batch_size(solver_p, 250, "positions per agent call")
    _add_common(solver_p)
    return parser


def check_outputs(args) -> None:
    """Before any work: ``--json`` and ``--plot`` can be written (``outputs.check_output``).

    Raises:
        outputs.OutputError: one line naming the path and why (its ``code``: the exit status).
    """
    plot_path = getattr(args, "plot", None)
    if plot_path is not None and plot_path.suffix.lower() != ".png":
        raise outputs.OutputError(f"--plot: {str(plot_path)!r} must be a .png file")
    for name, path in (("--json", args.json), ("--plot", plot_path)):
        if path is not None:
            outputs.check_output(path, name=name)
    if args.json is not None and plot_path is not None and args.json.resolve() == (
        plot_path.resolve()
    ):
        raise outputs.OutputError(
            f"--json and --plot: both name {str(args.json)!r}; give two files"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status: 2 for bad input (a path that
    cannot be written among it, found before the evaluation), ``outputs.EXIT_IO``
    (74) when the disk fills up while the results are written."""
    xla_flags.enable_fast_cpu()  # before the first device query
    compile_cache.enable()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except cli.UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    checkpoints.quiet_orbax_logs()
    cli.one_line_warnings()
    if args.command == "solver":
        args.sims_given = args.sims is not None
        args.sims = "0,64,600" if args.sims is None else args.sims
    runners = {"match": run_match, "elo": run_elo, "solver": run_solver}
    try:
        check_outputs(args)
        summary = runners[args.command](args)
        if args.json is not None:
            text = json.dumps(_to_json({"command": args.command, **summary}), indent=1)
            outputs.write_output(args.json, lambda tmp: tmp.write_text(text), name="--json",
                              note=_NOT_SAVED)
            print(f"results written to {args.json}")
    except outputs.OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
