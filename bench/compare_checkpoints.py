"""Networks compared on the same positions: checkpoints of several runs, each
playing with its own search settings and ``--sims`` simulations.

A training change is screened by comparing its run with the unchanged preset's
runs at the same iteration (same learning-rate schedule, stopped early): at 260
iterations of the ``strong`` preset two seeds agree within a few tenths of a
point on 2000 opening positions, so a change that moves them by two points shows
in under half of the two hours. Prints each checkpoint's mistake rates, then
how many positions each one gets right that the first gets wrong and the
reverse, with a sign test.

    python -m bench.compare_checkpoints runs/strong5:260 runs/strong7:260 runs/new:260 \\
        --sims 64 --sets L1_R3,bench/data/dev_L1_R3.jsonl --json OUT.json
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from bench.ablate_search import (
    load_positions,
    paired_report,
    restore,
    score_agents,
    write_json,
)
from c4jax import checkpoints, network
from c4jax.judge import agents, solver


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare_checkpoints")
    parser.add_argument("checkpoints", nargs="+", help="RUN:STEP, RUN or pretrained")
    parser.add_argument("--sims", type=int, default=64)
    parser.add_argument("--sets", default="L1_R3", help="comma-separated names or .jsonl files")
    parser.add_argument("--positions", type=int, default=None, help="the first N of each set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.sims < 0:
        parser.error(f"--sims: got {args.sims}, allowed: >= 0")
    if args.positions is not None and args.positions < 1:
        parser.error(f"--positions: got {args.positions}, allowed: >= 1")
    if len(set(args.checkpoints)) < len(args.checkpoints):
        parser.error("a checkpoint is named twice")
    checkpoints.quiet_orbax_logs()
    try:
        sets = [load_positions(s).head(args.positions) for s in args.sets.split(",")]
        restored = {spec: restore(spec) for spec in args.checkpoints}
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    acts = {}
    for spec, r in restored.items():
        apply_fn = network.make_apply_fn(network.make_network(r.config.network))
        act = agents.make_alphazero_act(apply_fn, r.config.search, num_simulations=args.sims)
        acts[spec] = functools.partial(act, r.variables)
    rows, mistakes = score_agents(acts, sets, seed=args.seed)
    print(solver.format_table(rows))
    if len(acts) > 1:
        print(paired_report(mistakes, args.checkpoints[0]))
    if args.json:
        write_json(args.json, {"sims": args.sims}, rows, mistakes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
