"""Search settings for an evaluating agent, compared on the same positions.

For one network (the packaged ``pretrained`` agent by default, or a run's
checkpoint) and one simulation count, evaluates each ``--variant`` (search
config overrides, ``field=value`` joined by commas; ``base`` = the network's own
settings) on Pons sets and/or held-out position files (``bench.devset``). Tune on
held-out files, then check the choice once on the Pons sets: tuning on the
benchmark itself would overfit it.

    python -m bench.ablate_search --sims 600 --sets bench/data/dev_L1_R3.jsonl \\
        --variant base --variant c_scale=0.3 --variant algorithm=puct,pb_c_init=2 \\
        --json bench/results/strength/search_dev.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import time
import typing
from pathlib import Path

import jax
import numpy as np

from bench import outfile
from c4jax.alphazero import config, network, search
from c4jax.judge import solver
from c4jax.store import checkpoints, exported


def parse_variant(text: str, base: config.SearchConfig) -> config.SearchConfig:
    """``"c_scale=0.3,algorithm=puct"`` -> ``base`` with those fields replaced.

    Raises:
        ValueError: an unknown field or a value of the wrong type.
    """
    if text == "base":
        return base
    hints = typing.get_type_hints(config.SearchConfig)
    changes = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or name not in hints:
            raise ValueError(
                f"variant {text!r}: expected FIELD=VALUE with FIELD one of {sorted(hints)}"
            )
        kind = hints[name]
        try:
            changes[name] = kind(value) if kind in (int, float) else value
        except ValueError:
            raise ValueError(
                f"variant {text!r}: {name} needs a {kind.__name__}, got {value!r}"
            ) from None
    return dataclasses.replace(base, **changes)


def load_positions(spec: str) -> solver.PonsSet:
    """A Pons set name (``L1_R3``) or a ``.jsonl`` file in the Pons format."""
    if spec.endswith(".jsonl"):
        path = Path(spec)
        return solver.load_set(path.stem, path.parent, verify=False)
    return solver.load_set(spec)


def restore(spec: str) -> checkpoints.NetworkCheckpoint:
    """``RUN:STEP``, ``RUN`` (its best checkpoint by evaluation score, as
    ``checkpoints.restore_variables`` chooses) or ``pretrained``."""
    if spec == "pretrained":
        return exported.load_exported()
    run, _, step = spec.partition(":")
    if step and not step.isdigit():
        raise ValueError(f"{spec!r}: expected RUN:STEP with STEP a whole number")
    return checkpoints.restore_variables(run, int(step) if step else None)


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign-test p-value of ``wins`` against ``losses`` (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_report(mistakes: dict[str, dict[str, list[int]]], reference: str) -> str:
    """Each variant against ``reference`` on the same positions: how many the
    variant fixes and how many it breaks, with a two-sided sign-test p-value
    (only the positions where the two disagree carry information)."""
    lines = [f"paired against {reference!r}: fixed / broken (sign test p)"]
    for name, by_set in mistakes.items():
        if name == reference:
            continue
        cells = []
        for set_name, wrong in by_set.items():
            ref = set(mistakes[reference][set_name])
            fixed, broken = len(ref - set(wrong)), len(set(wrong) - ref)
            p = sign_test(fixed, broken)
            cells.append(f"{set_name} {fixed}/{broken} (p={p:.2f})")
        lines.append(f"  {name:40s} " + "  ".join(cells))
    return "\n".join(lines)


def score_agents(
    acts: dict[str, typing.Callable], sets: list[solver.PonsSet], *, seed: int = 0
) -> tuple[dict[str, dict[str, dict]], dict[str, dict[str, list[int]]]]:
    """Each agent's move on every position of every set, judged by the solver.

    Args:
        acts: name -> agent (``act(key, state[B]) -> action [B]``).
        sets: the positions; every agent gets the same positions and keys.

    Returns:
        ``(rows, mistakes)``: ``rows[name][set]`` is ``solver.summarize``'s dict
        and ``mistakes[name][set]`` the indices of the positions it got wrong.
        One line per agent is printed as it finishes.
    """
    rows, mistakes = {}, {name: {} for name in acts}
    for name, agent in acts.items():
        start = time.perf_counter()
        out = {}
        for i, pons_set in enumerate(sets):
            key = jax.random.fold_in(jax.random.key(seed), i)
            chosen = solver.choose_moves(agent, key, pons_set, batch_size=500)
            verdicts = solver.judge_moves(pons_set.move_scores, pons_set.legal, chosen)
            out[pons_set.name] = solver.summarize(verdicts)
            mistakes[name][pons_set.name] = np.flatnonzero(verdicts["mistake"]).tolist()
        rows[name] = out
        rates = "  ".join(f"{s} {100 * r['mistake_rate']:5.1f}" for s, r in out.items())
        print(f"{name:40s} {rates}  ({time.perf_counter() - start:.0f} s)", flush=True)
    return rows, mistakes


def write_json(path: Path, header: dict, rows: dict, mistakes: dict) -> None:
    """``header`` plus the results and the mistaken positions' indices, as JSON."""
    record = {**header, "results": rows, "mistakes": mistakes}
    outfile.write_json(path, record, name="--json", indent=1, default=float)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ablate_search")
    parser.add_argument("--checkpoint", default=None, help="RUN_DIR[:STEP]; default: pretrained")
    parser.add_argument("--sims", type=int, default=600)
    parser.add_argument("--sets", default="L1_R3", help="comma-separated names or .jsonl files")
    parser.add_argument("--variant", action="append", default=None)
    parser.add_argument("--positions", type=int, default=None, help="the first N of each set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=outfile.path_arg("--json"), default=None)
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()
    try:
        restored = restore(args.checkpoint or "pretrained")
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    if args.sims < 0:
        parser.error(f"--sims: got {args.sims}, allowed: >= 0")
    if args.positions is not None and args.positions < 1:
        parser.error(f"--positions: got {args.positions}, allowed: >= 1")
    variants = args.variant or ["base"]
    try:
        configs = {v: parse_variant(v, restored.config.search) for v in variants}
        for c in configs.values():
            config.validate(dataclasses.replace(restored.config, search=c))
        sets = [load_positions(s).head(args.positions) for s in args.sets.split(",")]
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    apply_fn = network.make_apply_fn(network.make_network(restored.config.network))
    acts = {
        name: functools.partial(
            search.make_alphazero_act(apply_fn, c, num_simulations=args.sims), restored.variables
        )
        for name, c in configs.items()
    }
    rows, mistakes = score_agents(acts, sets, seed=args.seed)
    print(solver.format_table(rows))
    if len(configs) > 1:
        print(paired_report(mistakes, variants[0]))
    if args.json:
        header = {"checkpoint": args.checkpoint or "pretrained", "sims": args.sims}
        write_json(args.json, header, rows, mistakes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
