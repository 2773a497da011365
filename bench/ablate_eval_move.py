"""Which move should an evaluating Gumbel agent play? Mistake rates on the Pons sets.

For one checkpoint and each simulation count, compares ``search.evaluation_move``:
``halving`` (mctx's survivor of sequential halving), ``policy`` (argmax of the
improved policy) and ``q`` (argmax of the search's Q-values), on the same
positions (all six sets, 1000 each unless ``--positions``).

    python -m bench.ablate_eval_move runs/X:100 --sims 16,64 --json bench/results/eval_move.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys

import jax

from bench import bench_env, outfile
from c4jax.alphazero import network, search
from c4jax.judge import solver
from c4jax.store import checkpoints

MOVES = ("halving", "policy", "q")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ablate_eval_move")
    parser.add_argument("run", help="RUN_DIR or RUN_DIR:STEP")
    parser.add_argument("--sims", default="16,64")
    parser.add_argument("--positions", type=bench_env.at_least(1), default=None)
    parser.add_argument("--json", type=outfile.path_arg("--json"), default=None)
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()
    run, _, step = args.run.partition(":")
    restored = checkpoints.restore_variables(run, int(step) if step else None)
    apply_fn = network.make_apply_fn(network.make_network(restored.config.network))
    rows = {}
    for sims in [int(s) for s in args.sims.split(",")]:
        for move in MOVES:
            search_config = dataclasses.replace(restored.config.search, evaluation_move=move)
            act = search.make_alphazero_act(apply_fn, search_config, num_simulations=sims)
            agent = functools.partial(act, restored.variables)
            out = solver.evaluate_agent(
                agent, jax.random.key(0), solver.SET_NAMES, args.positions, batch_size=500
            )
            name = f"{sims} sims, {move}"
            rows[name] = out
            rates = "  ".join(f"{s} {100 * r['mistake_rate']:5.1f}" for s, r in out.items())
            mean = 100 * sum(r["mistake_rate"] for r in out.values()) / len(out)
            print(f"{name:18s} {rates}  mean {mean:5.2f}", flush=True)
    print(solver.format_table(rows))
    if args.json:
        outfile.write_json(args.json, {"run": args.run, "step": restored.step, "results": rows},
                           name="--json", indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
