"""``python -m c4jax.dqn.train``: the thin loop around the fused value-based step.

Usage:
    python -m c4jax.dqn.train --config grogu      # the linear "Grogu" (~10 minutes)
    python -m c4jax.dqn.train --config ddqn       # the Double DQN "Yoda" MLP (~30 minutes)
    python -m c4jax.dqn.train --config qlearning  # plain Q-learning: no double Q, no target net
    python -m c4jax.dqn.train --workdir runs/X    # continue runs/X

The same run directory as ``python -m c4jax.train`` (``config.json``,
``metrics.jsonl``, ``tb/``, ``checkpoints/``, the lock), the same Ctrl-C
(save, print the command that continues, exit 130), the same damaged-checkpoint
fallback and NaN guard. The agent of a run is the agent spec ``dqn:RUN_DIR``
(or just ``RUN_DIR``) in ``evaluate`` and ``play``.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads, so a Ctrl-C while importing exits cleanly too
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted before training started.")

import argparse
import datetime
import json
import sys
from pathlib import Path

from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn.config import DQNConfig
from c4jax.run import cli, interrupt, rundir, runlog, train_dqn, xla_flags
from c4jax.store import checkpoints

RUNS_DIR = Path("runs")
NonFiniteError = train_dqn.NonFiniteError


def parse_args(argv: list[str]) -> tuple[DQNConfig, Path, runlog.Mode, bool, str]:
    """``(config, workdir, progress mode, print_config, source)`` from the command line."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    pre.add_argument("--workdir", default=None)
    pre.add_argument("--no-progress", action="store_true")
    pre.add_argument("--print-config", action="store_true")
    known, rest = pre.parse_known_args(argv)
    workdir = Path(known.workdir) if known.workdir else (
        RUNS_DIR / ("dqn-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    )
    stored = workdir / "config.json"
    if known.config is None and stored.is_file():
        if not dqn_config.is_dqn_run(workdir):
            raise ValueError(f"--workdir {workdir}: an AlphaZero run; continue it with "
                             f"python -m c4jax.train --workdir {workdir}")
        base, source = dqn_config.load(str(stored)), f"the run directory's {stored}"
    else:
        name = known.config or "ddqn"
        base = dqn_config.load(name)
        source = f"preset {name}" if name in dqn_config.preset_names() else f"config file {name}"
    description = (
        "Train a value-based agent (Double DQN, Q-learning, the linear Grogu) for Connect Four."
        f"\n\nDefaults below come from {source}.\n"
        "Extra flags: --config NAME|PATH (presets: " + ", ".join(dqn_config.preset_names())
        + "), --workdir DIR (default runs/dqn-<date-time>; continues a run there), "
        "--no-progress (one plain line per iteration), "
        "--print-config (print the resolved configuration as JSON and exit)."
    )
    config = cli.tyro_cli(DQNConfig, default=base, args=rest, description=description,
                          prog="python -m c4jax.dqn.train")
    mode: runlog.Mode = "lines" if known.no_progress else runlog.default_mode()
    return config, workdir, mode, known.print_config, source


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    xla_flags.enable_fast_cpu()  # before the first device query
    try:
        config, workdir, mode, print_config, source = parse_args(argv)
        dqn_config.validate(config)
        if print_config:
            print(json.dumps(config_lib.to_dict(config), indent=2))
            return 0
        rundir.prepare(workdir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cli.one_line_warnings()
    checkpoints.quiet_orbax_logs()
    print(f"c4jax.dqn.train: {source}, {config.train.num_iterations} iterations of "
          f"{config.train.num_envs} games x {config.train.env_steps} moves; "
          f"run directory {workdir}")
    try:
        summary = train_dqn.train_and_evaluate(config, workdir, progress=mode)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except NonFiniteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if summary["interrupted"]:
        return interrupt.EXIT_CODE
    if summary["done"]:
        final = ", ".join(f"{k} {v:.3f}" for k, v in summary["eval"].items())
        print(f"finished iteration {summary['step']}; last evaluation: {final or 'none'}")
    print(f"outputs in {workdir}; play it: python -m c4jax.play {workdir}; "
          f"rate it: python -m c4jax.evaluate match dqn:{workdir} lookahead --games 400")
    return 0


if __name__ == "__main__":
    sys.exit(main())
