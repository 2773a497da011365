"""``python -m bench.judge_run``: judge a trained run the way the experiments record does.

Usage:
    python -m bench.judge_run runs/X --out bench/results/strength/X
    python -m bench.judge_run runs/X --out bench/results/strength/X \\
        --compare bench/results/strength/strong_xeon_s0
    python -m bench.judge_run --report bench/results/strength/X \\
        --compare bench/results/strength/strong_xeon_s0

One command for the battery behind every whole-run entry of
``docs/experiments.md``: six ``python -m c4jax.evaluate`` commands on the run's
last checkpoint (or the step given as ``runs/X:STEP``), each writing its JSON
next to ``--out`` (``OUT_<suffix>.json``), cheapest and most telling first:

| stage | what | file suffix |
|---|---|---|
| ``sets`` | the six full Pons sets, 0 and 64 simulations | ``0_64`` |
| ``h2h`` | ``--against`` at 64, every two-ply opening, both colours | ``vs_pretrained_64_every2`` |
| ``perfect`` | ``perfect`` at 600, the same openings, judged | ``600_vs_perfect_every2`` |
| ``empty`` | ``perfect`` at 600, empty board, 20 games, judged | ``600_vs_perfect_empty20`` |
| ``empty_low`` | the same at 64 | ``64_vs_perfect_empty20`` |
| ``sets_high`` | the six full sets at 600 | ``600`` |

The checkpoint is chosen once, when the battery starts (``runs/X`` becomes
``runs/X:STEP``), so a run that trains on meanwhile does not mix checkpoints. A
stage whose JSON is already there is skipped, so a battery that was stopped
resumes where it stopped, when the JSON holds that checkpoint's results (and
the same opponent and positions); one of another checkpoint, run or
``--positions`` is an error that names both (``--force`` runs every stage
again). About 15 minutes
for a ``strong``-preset network on a 2-core CPU, most of it in ``perfect`` and
``sets_high``. At the end (or alone, with ``--report PREFIX``) it prints the
record's two tables, Markdown: the full-set mistake rates by simulations, and
the match measures (head to head, score and results kept against
``perfect``, opening mistakes by stage, empty-board games), one column per
prefix, ``--compare`` prefixes after the run's. A file that is missing is
``n/a`` in its cells.

The file names are those of ``bench/results/strength/``, so a run judged here
compares with the shipped agent's run (``strong_xeon_s0``) directly. The
simulation counts (``--low``, ``--high``), the empty-board games and the
opening plies are flags, and the suffixes carry them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from c4jax import evaluate
from c4jax.judge import registry

STAGES = ("sets", "h2h", "perfect", "empty", "empty_low", "sets_high")


@dataclasses.dataclass(frozen=True)
class Stage:
    """One evaluate command of the battery."""

    name: str  # one of STAGES
    suffix: str  # the JSON is PREFIX_<suffix>.json
    argv: tuple[str, ...]  # python -m c4jax.evaluate's arguments, --json left out


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the battery measures; the defaults are the experiments record's."""

    low: int = 64  # simulations of the quick searches
    high: int = 600  # simulations of the slow ones
    empty_games: int = 20  # games from the empty board (half as first player)
    openings: int = 2  # plies of the every-opening matches (2 x 7^K games)
    against: str = "pretrained"  # the head-to-head opponent, an agent spec without @SIMS
    positions: int | None = None  # the first N positions of each set (None: all)


def against_label(spec: str) -> str:
    """The head-to-head opponent's name in file suffixes: ``pretrained``, or the last
    path part of a run spec with anything but letters, digits, ``-`` and ``_`` as ``_``."""
    if spec == "pretrained":
        return spec
    return re.sub(r"[^A-Za-z0-9_-]", "_", spec.rstrip("/").split("/")[-1])


def stages(run: str, settings: Settings) -> list[Stage]:
    """The battery for ``run`` (``RUN_DIR`` or ``RUN_DIR:STEP``; the last checkpoint when
    no step is given), in the order it runs."""
    ckpt = run if ":" in Path(run).name else f"{run}:last"
    low, high, k = settings.low, settings.high, settings.openings
    positions = () if settings.positions is None else ("--positions", str(settings.positions))
    every = ("--openings", str(k), "--every-opening")
    empty = ("--games", str(settings.empty_games), "--openings", "0", "--judge")
    label = against_label(settings.against)
    return [
        Stage("sets", f"0_{low}",
              ("solver", "--checkpoint", ckpt, "--sims", f"0,{low}", "--baselines", "",
               *positions)),
        Stage("h2h", f"vs_{label}_{low}_every{k}",
              ("match", f"{ckpt}@{low}", f"{settings.against}@{low}", *every)),
        Stage("perfect", f"{high}_vs_perfect_every{k}",
              ("match", f"{ckpt}@{high}", "perfect", *every, "--judge")),
        Stage("empty", f"{high}_vs_perfect_empty{settings.empty_games}",
              ("match", f"{ckpt}@{high}", "perfect", *empty)),
        Stage("empty_low", f"{low}_vs_perfect_empty{settings.empty_games}",
              ("match", f"{ckpt}@{low}", "perfect", *empty)),
        Stage("sets_high", f"{high}",
              ("solver", "--checkpoint", ckpt, "--sims", str(high), "--baselines", "",
               *positions)),
    ]


def output(prefix: str | Path, stage: Stage) -> Path:
    return Path(f"{prefix}_{stage.suffix}.json")


def pinned(run: str) -> str:
    """``RUN_DIR`` or ``RUN_DIR:STEP`` (also ``:last``, ``:best``) as ``RUN_DIR:STEP``,
    the checkpoint resolved once (no step: the newest), as the agents name it.

    Raises:
        ValueError: not a run directory, or no such checkpoint.
    """
    ckpt = run if ":" in Path(run).name else f"{run}:last"
    return registry.make_agent(f"{ckpt}@0").name.rsplit("@", 1)[0]


def expected(stage: Stage, ckpt: str, settings: Settings) -> dict:
    """What the JSON of ``stage`` holds when it judged ``ckpt`` (``RUN_DIR:STEP``)
    with ``settings``: the agents' names, and a solver stage's positions."""
    low, high = settings.low, settings.high
    if stage.name in ("sets", "sets_high"):
        sims = (0, low) if stage.name == "sets" else (high,)
        return {"agents": [f"{ckpt}@{n}" for n in sims], "positions": settings.positions}
    sims = low if stage.name in ("h2h", "empty_low") else high
    want = {"a": f"{ckpt}@{sims}"}
    if stage.name == "h2h":
        want["b"] = registry.make_agent(f"{settings.against}@{low}").name
    return want


def mismatch(data: dict | None, want: dict) -> str | None:
    """Why a stage's JSON is not the result wanted, or None when it is."""
    if data is None:
        return "no readable JSON"
    for key, value in want.items():
        if data.get(key, "(none)") != value:
            return f"{key} {data.get(key, '(none)')!r}, not {value!r}"
    return None


# --- The report: the record's tables from the JSON files. ---


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}"


def set_rows(prefix: str | Path, settings: Settings) -> dict[int, tuple[str, dict]]:
    """``{sims: (agent, {set: result})}`` from the prefix's solver files."""
    rows = {}
    by_name = {s.name: s for s in stages("run", settings)}
    for name in ("sets", "sets_high"):
        data = _load(output(prefix, by_name[name]))
        if data is None:
            continue
        for agent, results in data["results"].items():
            rows[int(agent.rsplit("@", 1)[1])] = (agent, results)
    return rows


def _step(agent: str) -> str:
    """``runs/X:1443@64`` -> ``1443``."""
    return agent.rsplit("@", 1)[0].rsplit(":", 1)[-1]


def sets_table(prefixes: Sequence[str | Path], settings: Settings) -> str:
    """Mistakes in % on each set, and their mean, by simulations then prefix."""
    loaded = [set_rows(p, settings) for p in prefixes]
    names = next((list(r[s][1]) for r in loaded for s in r), [])
    lines = ["| run | sims | " + " | ".join(names) + " | mean |",
             "|---|---:|" + "---:|" * len(names) + "---:|"]
    for sims in (0, settings.low, settings.high):
        for prefix, rows in zip(prefixes, loaded, strict=True):
            if sims not in rows:
                cells = ["n/a"] * (len(names) + 1)
                label = Path(prefix).name
            else:
                agent, results = rows[sims]
                rates = [results[n]["mistake_rate"] for n in names]
                cells = [_pct(r) for r in rates] + [_pct(sum(rates) / len(rates), 2)]
                label = f"{Path(prefix).name} ({_step(agent)})"
            lines.append(f"| {label} | {sims} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _score(m: dict) -> str:
    lo, hi = m["score_ci"]
    return (f"{_pct(m['score'])}% [{_pct(lo)}, {_pct(hi)}] "
            f"(+{m['wins']} ={m['draws']} -{m['losses']})")


def _stage_mistakes(m: dict, low: int, high: int) -> str:
    for row in m.get("judged_by_stage", ()):
        if list(row["stones"]) == [low, high]:
            n, k = row["nontrivial"], row["mistakes"]
            return f"{k} / {n} = {_pct(k / n) if n else 'n/a'}%"
    return "n/a"


def _first_player(m: dict) -> str:
    f = m["as_first"]
    text = f"+{f['wins']} ={f['draws']} -{f['losses']}"
    judged = m.get("judged")
    if judged:
        text += f" ({judged['mistakes']} mistakes in {judged['positions']} moves)"
    return text


def measures_table(prefixes: Sequence[str | Path], settings: Settings) -> str:
    """The match measures, one column per prefix."""
    by_name = {s.name: s for s in stages("run", settings)}

    def files(name):
        return [_load(output(p, by_name[name])) for p in prefixes]

    h2h, perf = files("h2h"), files("perfect")
    empty, empty_low = files("empty"), files("empty_low")
    k, low, high, n = settings.openings, settings.low, settings.high, settings.empty_games
    rows = [
        (f"head to head at {low} simulations, every {k}-ply opening in each colour",
         h2h, lambda m: f"{_score(m)} against {m['b']}"),
        (f"against `perfect` at {high} simulations, same openings: score", perf, _score),
        (f"results kept against `perfect` (of {2 * 7 ** k})", perf,
         lambda m: f"{m['kept_result']['kept']} / {m['kept_result']['games']}"),
        ("non-trivial mistakes there at 0-9 stones", perf,
         lambda m: _stage_mistakes(m, 0, 9)),
        ("the same at 10-19 stones", perf, lambda m: _stage_mistakes(m, 10, 19)),
        (f"empty board, first player, {n // 2} games at {high} simulations", empty,
         _first_player),
        (f"empty board, first player, {n // 2} games at {low} simulations", empty_low,
         _first_player),
    ]
    lines = ["| measure | " + " | ".join(Path(p).name for p in prefixes) + " |",
             "|---|" + "---:|" * len(prefixes)]
    for title, data, cell in rows:
        cells = []
        for m in data:
            try:
                cells.append("n/a" if m is None else cell(m))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append("n/a")
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(prefixes: Sequence[str | Path], settings: Settings) -> str:
    return sets_table(prefixes, settings) + "\n\n" + measures_table(prefixes, settings)


# --- The command line. ---


def _positive(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"got {text!r}, allowed: an integer 1..4096")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.judge_run",
        description="Judge a run's checkpoint with the experiments record's battery "
        "(full Pons sets, head to head, games against perfect) and print its tables.",
    )
    p.add_argument("run", nargs="?", help="RUN_DIR or RUN_DIR:STEP (default step: last)")
    p.add_argument("--out", help="the prefix of the JSON files (OUT_<stage suffix>.json)")
    p.add_argument("--report", metavar="PREFIX",
                   help="only print the tables of the files at PREFIX (no run)")
    p.add_argument("--compare", action="append", default=[], metavar="PREFIX",
                   help="another prefix's files beside the run's in the tables (repeatable)")
    p.add_argument("--stages", default=",".join(STAGES),
                   help=f"which stages, comma-separated (default all: {','.join(STAGES)})")
    p.add_argument("--force", action="store_true", help="run stages whose JSON exists again")
    p.add_argument("--low", type=_positive, default=64, help="simulations, quick searches")
    p.add_argument("--high", type=_positive, default=600, help="simulations, slow searches")
    p.add_argument("--empty-games", type=_positive, default=20,
                   help="games from the empty board, an even number (default 20)")
    p.add_argument("--openings", type=int, choices=(1, 2), default=2,
                   help="plies of the every-opening matches (default 2: 98 games)")
    p.add_argument("--against", default="pretrained",
                   help="head-to-head opponent, an agent spec without @SIMS")
    p.add_argument("--positions", type=_positive, default=None,
                   help="only the first N positions of each set (default all)")
    return p


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.run is None) == (args.report is None):
        parser.error("give a run to judge, or --report PREFIX, not both")
    if args.run is not None and args.out is None:
        parser.error("--out: give the prefix of the JSON files")
    if args.report is not None and args.out is not None:
        parser.error("--out: not with --report (the files are read at PREFIX)")
    chosen = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(chosen) - set(STAGES))
    if unknown or not chosen:
        parser.error(f"--stages: got {args.stages!r}, allowed: {','.join(STAGES)}")
    args.stages = [s for s in STAGES if s in chosen]
    if args.empty_games % 2:
        parser.error(f"--empty-games: got {args.empty_games}, allowed: an even number")
    if "@" in args.against:
        parser.error(f"--against: got {args.against!r}; the simulations come from --low")
    try:  # an agent that searches: it plays with --low simulations
        registry.parse_spec(f"{args.against}@{args.low}")
    except ValueError:
        parser.error(f"--against: got {args.against!r}, allowed: an agent that searches "
                     "(pretrained, RUN_DIR[:STEP] or an exported network's directory)")
    settings = Settings(low=args.low, high=args.high, empty_games=args.empty_games,
                        openings=args.openings, against=args.against,
                        positions=args.positions)
    return args, settings


def _missing(prefixes: Sequence[str], settings: Settings) -> str | None:
    """The first prefix with none of the battery's files, or None."""
    suffixes = [output("", stage).name for stage in stages("RUN", settings)]
    for prefix in prefixes:
        if not any(Path(f"{prefix}{suffix}").is_file() for suffix in suffixes):
            return prefix
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args, settings = parse_args(argv)
    given = [args.report] if args.report is not None else []
    missing = _missing([*given, *args.compare], settings)
    if missing is not None:  # a typo printed tables of n/a, and exit status 0
        flag = "--report" if missing == args.report else "--compare"
        print(f"error: {flag}: no file of the battery at {missing!r}"
              f" ({missing}_{stages('RUN', settings)[0].suffix}.json, ...)", file=sys.stderr)
        return 2
    if args.report is not None:
        print(report([args.report, *args.compare], settings))
        return 0
    try:
        ckpt = pinned(args.run)
    except ValueError as err:
        print(f"error: {registry.short_error(err)}", file=sys.stderr)
        return 2
    print(f"judging {ckpt}", flush=True)
    todo = [s for s in stages(ckpt, settings) if s.name in args.stages]
    for i, stage in enumerate(todo, 1):
        path = output(args.out, stage)
        if path.exists() and not args.force:
            why = mismatch(_load(path), expected(stage, ckpt, settings))
            if why is not None:
                print(f"error: {path} is not the {stage.name} stage of {ckpt} ({why}): "
                      "give another --out, or --force to measure it again", file=sys.stderr)
                return 2
            print(f"[{i}/{len(todo)}] {stage.name}: {path} exists, skipped", flush=True)
            continue
        command = " ".join(repr(a) if not a or " " in a else a for a in stage.argv)
        print(f"[{i}/{len(todo)}] {stage.name}: python -m c4jax.evaluate {command}", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        code = evaluate.main([*stage.argv, "--json", str(path)])
        if code != 0:
            print(f"error: stage {stage.name} failed (exit status {code}); the stages "
                  "before it are kept, and a second call resumes here", file=sys.stderr)
            return code
    print()
    print(report([args.out, *args.compare], settings))
    return 0


if __name__ == "__main__":
    from c4jax.run import interrupt

    interrupt.exit_on_interrupt(
        "Interrupted. The stages finished are kept; the same command goes on from the next.")
    sys.exit(main())
