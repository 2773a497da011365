"""Networks compared on the same positions: checkpoints of several runs, each
playing with its own search settings and ``--sims`` simulations.

A training change is screened by comparing its run with the unchanged preset's
runs at the same iteration (same learning-rate schedule, stopped early): at 260
iterations of the ``strong`` preset two seeds agree within a few tenths of a
point on 2000 opening positions, so a change that moves them by two points shows
in under half of the two hours. Results saved earlier with ``--json`` come back
with ``--reference FILE.json``, so a run whose checkpoints are gone still
serves as a baseline (the same positions, matched by set name and size, and the
same ``--sims`` and ``--seed``); they are listed first. Prints each
checkpoint's mistake rates, then how many positions each one gets right that
the first gets wrong and the reverse, with a sign test.

    python -m bench.compare_checkpoints runs/strong5:260 runs/strong7:260 runs/new:260 \\
        --sims 64 --sets L1_R3,bench/data/dev_L1_R3.jsonl --json OUT.json
    python -m bench.compare_checkpoints runs/new:260 --reference OUT.json --sims 64 \\
        --sets L1_R3,bench/data/dev_L1_R3.jsonl
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from pathlib import Path

from bench import outfile
from bench.ablate_search import (
    load_positions,
    paired_report,
    restore,
    score_agents,
    write_json,
)
from c4jax.alphazero import network, search
from c4jax.judge import solver
from c4jax.store import checkpoints


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare_checkpoints")
    parser.add_argument("checkpoints", nargs="+", help="RUN:STEP, RUN or pretrained")
    parser.add_argument("--sims", type=int, default=64)
    parser.add_argument("--sets", default="L1_R3", help="comma-separated names or .jsonl files")
    parser.add_argument("--positions", type=int, default=None, help="the first N of each set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=outfile.path_arg("--json"), default=None)
    parser.add_argument(
        "--reference",
        type=Path,
        action="append",
        default=[],
        help="an earlier --json of this tool: its checkpoints' results join the comparison, "
        "listed first (the first of them is the one the others are paired against)",
    )
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
        earlier_rows, earlier_mistakes = load_references(args.reference, sets, args.sims, args.seed)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    twice = sorted(set(earlier_rows) & set(args.checkpoints))
    if twice:
        parser.error(f"a checkpoint is named twice (also in a --reference): {twice}")
    acts = {}
    for spec, r in restored.items():
        apply_fn = network.make_apply_fn(network.make_network(r.config.network))
        act = search.make_alphazero_act(apply_fn, r.config.search, num_simulations=args.sims)
        acts[spec] = functools.partial(act, r.variables)
    rows, mistakes = score_agents(acts, sets, seed=args.seed)
    rows, mistakes = {**earlier_rows, **rows}, {**earlier_mistakes, **mistakes}
    print(solver.format_table(rows))
    if len(rows) > 1:
        print(paired_report(mistakes, next(iter(rows))))
    if args.json:
        write_json(args.json, {"sims": args.sims, "seed": args.seed,
                               "positions_sha256": {p.name: positions_id(p) for p in sets}},
                   rows, mistakes)
    return 0


def positions_id(pons_set: solver.PonsSet) -> str:
    """The SHA-256 of a set's move strings in order: which positions, not only how many."""
    return hashlib.sha256("\n".join(pons_set.moves).encode()).hexdigest()


def load_references(
    paths: list[Path], sets: list[solver.PonsSet], sims: int, seed: int
) -> tuple[dict[str, dict[str, dict]], dict[str, dict[str, list[int]]]]:
    """The results of earlier ``--json`` files for ``sets``, as ``score_agents`` gives them.

    A file written before the seed was saved counts as seed 0 (the default then).

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a file is not this tool's JSON, was measured at other than
            ``sims`` simulations or ``seed``, or lacks one of ``sets`` (by name
            and size, and by its positions where the file records them: a set
            file made again with another seed has the same name and size).
    """
    rows, mistakes = {}, {}
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"--reference {path}: no such file")
        try:
            record = json.loads(path.read_text())
            saved = (record["sims"], record.get("seed", 0))
            if saved != (sims, seed):
                raise ValueError(
                    f"--reference {path}: measured at {saved[0]} simulations with seed "
                    f"{saved[1]}, not {sims} simulations with seed {seed}"
                )
            for name, by_set in record["results"].items():
                if name in rows:
                    raise ValueError(f"--reference {path}: {name!r} is named twice")
                for pons_set in sets:
                    row = by_set.get(pons_set.name)
                    if row is None or row["positions"] != len(pons_set):
                        raise ValueError(
                            f"--reference {path}: {name!r} has no result on the "
                            f"{len(pons_set)} positions of {pons_set.name}"
                        )
                rows[name] = {p.name: by_set[p.name] for p in sets}
                mistakes[name] = {p.name: record["mistakes"][name][p.name] for p in sets}
            ids = record.get("positions_sha256", {})  # files before it: name and size
            for pons_set in sets:
                if pons_set.name in ids and ids[pons_set.name] != positions_id(pons_set):
                    raise ValueError(
                        f"--reference {path}: its {pons_set.name} holds other positions than"
                        f" the {pons_set.name} given now, so its mistakes cannot be paired")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"--reference {path}: not a --json of this tool ({e!r})") from None
    return rows, mistakes


if __name__ == "__main__":
    sys.exit(main())
