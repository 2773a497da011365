"""Strength against search: solver mistake rates and play against the perfect player
as the number of simulations grows, for a network agent and for rollout MCTS.

For each simulation count N, the network agent ``AGENT@N`` (N = 0: the network
alone) and the rollout agent ``mcts-N`` are measured with

* the solver: the mistake rate on each Pons set (all 1000 positions unless
  ``--positions``), as ``python -m c4jax.evaluate solver``;
* the perfect player: every 2-ply opening once in each colour (98 games; K-ply
  with ``--openings K``), the
  agent's score and the games in which it kept the game-theoretic result its side
  had after the opening, as ``python -m c4jax.evaluate match AGENT@N perfect
  --openings 2 --every-opening --judge``.

Results go to ``OUT.json`` after every point, so a stopped sweep continues where it
was (points already there are skipped; ``--redo`` measures again; each point names
the machine and the command that measured it), and the figure
to ``OUT.png``. Points are reused only for the same agent: the same spec and, for
an exported network (``pretrained`` or an exported directory), the same weights,
so a sweep of ``pretrained`` after a new agent is shipped measures every point again.

    python -m bench.simulations --out bench/results/simulations
    python -m bench.simulations --agent runs/X --sims 0,16,64 --rollouts none --out /tmp/s
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

from bench import bench_env, outfile
from c4jax import inputs
from c4jax.judge import arena, perfect, registry, solver
from c4jax.run import xla_flags
from c4jax.store import exported

DEFAULT_SIMS = "0,1,2,4,8,16,32,64,128,256,512,1024"
DEFAULT_ROLLOUTS = "1,2,4,8,16,32,64,128,256,512,1024"


def _counts(name: str, low: int):
    """An argparse type: comma-separated whole numbers in ``low..MAX_SIMULATIONS``, or
    none (checked when the command line is read, not when the sweep reaches them)."""

    def parse(text: str) -> list[int]:
        if text == "none":
            return []
        try:
            return [inputs.parse_count(item.strip(), name=name, low=low,
                                       high=inputs.MAX_SIMULATIONS)
                    for item in text.split(",") if item.strip()]
        except inputs.InputError as err:
            raise argparse.ArgumentTypeError(
                str(err).removeprefix(f"{name}: ") + ", comma-separated, or none") from None

    return parse


def weights_id(agent: str) -> str | None:
    """The SHA-256 of the network's variables where ``agent`` (a spec without @N) is an
    exported network (``pretrained`` or a directory written by ``c4jax.export``), from
    its ``checksums.json``; None for a training run, whose checkpoints carry their
    step in the agent's name, and for the reference agents."""
    parsed = registry.parse_spec(agent)
    if parsed.kind == "pretrained":
        directory = exported.PRETRAINED_DIR
    elif parsed.kind == "run" and (parsed.run_dir / exported.CHECKSUMS_FILE).is_file():
        directory = parsed.run_dir
    else:
        return None
    checksums = json.loads((directory / exported.CHECKSUMS_FILE).read_text())
    return checksums["files"][exported.VARIABLES_FILE]


def pinned(agent: str) -> str:
    """``agent`` with a training run's checkpoint pinned (``RUN`` -> ``RUN:STEP``), so
    that every point of a sweep, resumed or run beside the training, plays one
    network; any other spec as given (an exported network is pinned by ``weights_id``)."""
    if registry.parse_spec(agent).kind != "run" or weights_id(agent) is not None:
        return agent
    return registry.make_agent(f"{agent}@0").name.rsplit("@", 1)[0]


def measure(spec: str, *, positions: int | None, openings: int, batch_size: int,
            seed: int) -> dict:
    """One point: ``{"solver": {set: summary}, "perfect": {...}, "seconds": ...}``."""
    start = time.perf_counter()
    name, agent = registry.make_agent(spec)
    results = solver.evaluate_agent(
        agent, jax.random.key(seed), list(solver.SET_NAMES), positions, batch_size=batch_size
    )
    judged = time.perf_counter()
    _, opponent = registry.make_agent("perfect")
    games = 2 * arena.num_exhaustive_openings(openings)
    match = arena.play_match(
        agent, opponent, jax.random.key(seed), games, opening_moves=openings,
        every_opening=True,
    )
    kept = perfect.kept_results(match.outcomes, match.a_first, openings)
    summary = arena.match_summary(match)
    return {
        "agent": name,
        "solver": results,
        "perfect": {
            "games": games,
            "score": summary["score"],
            "wins": match.wins,
            "draws": match.draws,
            "losses": match.losses,
            "kept": int(kept.sum()),
        },
        "seconds": {"solver": judged - start, "perfect": time.perf_counter() - judged},
    }


def _line(spec: str, point: dict) -> str:
    rates = " ".join(
        f"{s} {100 * point['solver'][s]['mistake_rate']:4.1f}" for s in solver.SET_NAMES
    )
    p = point["perfect"]
    return (f"{spec:>22}: mistakes % {rates} | vs perfect {100 * p['score']:4.1f}%, "
            f"kept {p['kept']}/{p['games']} ({sum(point['seconds'].values()):.0f} s)")


def plot(record: dict, path: Path) -> None:
    """Mean mistake rate and the perfect match's score against simulations."""
    import matplotlib  # only here: plotting is optional

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = [("network", record["agent"], "C0"), ("rollouts", "rollout MCTS", "C3")]
    for kind, label, colour in series:
        points = sorted((int(n), p) for n, p in record["points"][kind].items())
        if not points:
            continue
        # 0 simulations is drawn at 0.5 on the log axis, marked as "0".
        xs = [n if n else 0.5 for n, _ in points]
        mean = [100 * np.mean([p["solver"][s]["mistake_rate"] for s in solver.SET_NAMES])
                for _, p in points]
        hard = [100 * p["solver"]["L1_R3"]["mistake_rate"] for _, p in points]
        left.plot(xs, mean, "o-", color=colour, label=f"{label}: mean of the six sets")
        left.plot(xs, hard, "s--", color=colour, alpha=0.6, label=f"{label}: L1_R3")
        score = [100 * p["perfect"]["score"] for _, p in points]
        kept = [100 * p["perfect"]["kept"] / p["perfect"]["games"] for _, p in points]
        right.plot(xs, score, "o-", color=colour, label=f"{label}: score")
        right.plot(xs, kept, "s--", color=colour, alpha=0.6, label=f"{label}: result kept")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ticks = sorted({int(n) for kind in record["points"] for n in record["points"][kind]})
        ax.set_xticks([n if n else 0.5 for n in ticks], [str(n) for n in ticks], fontsize=7)
        ax.set_xlabel("simulations per move")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    left.set_ylabel("solver mistake rate (%)")
    left.set_ylim(bottom=0)
    left.set_title(f"Pons sets ({record['positions'] or 1000} positions each)")
    right.axhline(50, color="k", lw=0.8)
    right.set_ylabel("% against the perfect player")
    right.set_ylim(0, 100)
    games = 2 * 7 ** record["openings"]
    right.set_title(f"against perfect from every {record['openings']}-ply opening, {games} "
                    "games\n(a perfect agent: 50% score, 100% kept)", fontsize=10)
    fig.tight_layout()
    outfile.save_figure(fig, path, name="--out", dpi=120)
    plt.close(fig)


def table(record: dict) -> str:
    """Markdown: one row per point, mistakes % per set, their mean and the perfect match."""
    head = ("| agent | simulations | " + " | ".join(solver.SET_NAMES)
            + " | mean | score vs perfect | result kept |")
    rows = [head, "|---|" + "---:|" * (len(solver.SET_NAMES) + 4)]  # numbers to the right
    for kind in ("network", "rollouts"):
        for n, p in sorted((int(n), p) for n, p in record["points"][kind].items()):
            percent = [100 * p["solver"][s]["mistake_rate"] for s in solver.SET_NAMES]
            rates = " | ".join(f"{r:.1f}" for r in percent)
            q = p["perfect"]
            label = record["agent"] if kind == "network" else "rollout MCTS"
            rows.append(f"| {label} | {n} | {rates} | {np.mean(percent):.2f} | "
                        f"{100 * q['score']:.1f}% | {q['kept']} / {q['games']} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulations",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", default="pretrained",
                        help="the network agent, an agent spec without @N (default pretrained)")
    parser.add_argument("--sims", type=_counts("--sims", 0), default=DEFAULT_SIMS,
                        help=f"its simulation counts, or none (default {DEFAULT_SIMS})")
    parser.add_argument("--rollouts", type=_counts("--rollouts", 1), default=DEFAULT_ROLLOUTS,
                        help=f"rollout MCTS's, or none (default {DEFAULT_ROLLOUTS})")
    parser.add_argument("--positions", type=bench_env.at_least(1), default=None,
                        help="the first N of each Pons set (default all)")
    parser.add_argument("--openings", type=int, default=2, choices=range(0, 5),
                        help="the perfect match's every K-ply opening, both colours: 2 x 7^K "
                             "games (default 2: 98 games)")
    parser.add_argument("--batch-size", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--redo", action="store_true",
                        help="measure the listed points again, though done before (the file's"
                        " other points are kept; with other settings than the file's, start"
                        " it over)")
    parser.add_argument("--out", type=outfile.path_arg("--out", ".json", ".png"), required=True,
                        help="output path without suffix")
    args = parser.parse_args(argv)
    xla_flags.enable_fast_cpu()  # the command lines' code path, before the first device query

    try:
        args.agent = pinned(args.agent)
    except ValueError as err:
        parser.error(f"--agent: {registry.short_error(err)}")
    path = args.out.with_suffix(".json")
    same = {"agent": args.agent, "weights": weights_id(args.agent),
            "positions": args.positions, "openings": args.openings, "seed": args.seed}
    record = {**same, "points": {"network": {}, "rollouts": {}}}
    if path.exists():
        old = json.loads(path.read_text())
        differ = [k for k, v in same.items() if old.get(k) != v]
        if not differ:
            record = old
        elif not args.redo:  # starting it over would drop every point measured before
            parser.error(f"--out: {path} holds a sweep with another {', '.join(differ)}"
                         f" ({', '.join(f'{old.get(k)!r}' for k in differ)}); give another"
                         " --out, or --redo to start it over")
    record["device"] = {**bench_env.device_info(("mctx", "flax", "bitbully")),
                        "fast_cpu": xla_flags.fast_cpu_on()}
    record["command"] = bench_env.command_line("bench.simulations", argv)
    todo = [("network", n, f"{args.agent}@{n}") for n in args.sims]
    todo += [("rollouts", n, f"mcts-{n}") for n in args.rollouts]
    for kind, n, spec in todo:
        if str(n) in record["points"][kind] and not args.redo:
            print(_line(spec, record["points"][kind][str(n)]) + " (done before)", flush=True)
            continue
        point = measure(spec, positions=args.positions, openings=args.openings,
                        batch_size=args.batch_size, seed=args.seed)
        # A resumed sweep may run on another machine or with other flags: each point
        # keeps its own (the record's "device" and "command" are the latest run's).
        point["device"], point["command"] = record["device"], record["command"]
        record["points"][kind][str(n)] = point
        print(_line(spec, point), flush=True)
        outfile.write_json(path, record, name="--out", indent=1, default=float)
    plot(record, args.out.with_suffix(".png"))
    print(table(record))
    print(f"wrote {path} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
