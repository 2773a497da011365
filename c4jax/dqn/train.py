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
import functools
import json
import sys
from pathlib import Path

import jax

from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn import trainer as dqn_trainer
from c4jax.dqn.config import DQNConfig
from c4jax.judge import periodic
from c4jax.run import cli, interrupt, rundir, runlog, xla_flags
from c4jax.run import loop as runloop
from c4jax.store import checkpoints

RUNS_DIR = Path("runs")
OPPONENTS = ("random", "win-if-you-can", "lookahead")  # periodic evaluation, agent specs
_STATE_FIELDS = ("model.kind", "model.hidden", "train.num_envs", "train.replay_capacity")


NonFiniteError = runloop.NonFiniteError  # the loss or parameters became NaN/inf


def _resume_hint(workdir: Path) -> str:
    return f"python -m c4jax.dqn.train --workdir {workdir}"


def check_compatible(stored: DQNConfig, requested: DQNConfig) -> None:
    """Raises ValueError naming each field that a resumed checkpoint cannot change."""
    config_lib.check_unchanged(stored, requested, _STATE_FIELDS)


def _abstract(init, key):
    """The state's shapes and dtypes, placed on the first device (for Orbax's restore)."""
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
        jax.eval_shape(init, key),
    )


def train_and_evaluate(
    config: DQNConfig, workdir: str | Path, *, progress: bool | runlog.Mode = False,
    stop_after: int | None = None,
) -> dict:
    """Trains (or continues) the value-based run in ``workdir``.

    Args:
        config: the run's configuration (validated here).
        workdir: run directory; its newest good checkpoint is continued.
        progress: ``bar``, ``lines`` or ``off`` (True: ``bar`` on a terminal, else ``lines``).
        stop_after: stop (saving a checkpoint) after this many iterations of this
            call, as a Ctrl-C would; for tests.

    Returns:
        ``step``, ``workdir``, the last ``metrics`` and ``eval``, the final
        ``state``, ``done`` (iterations this call did), ``interrupted``.

    Raises:
        ValueError: a bad config or an unusable run directory, before compiling.
        NonFiniteError: the loss or parameters became NaN/inf.
    """
    dqn_config.validate(config)
    mode = runlog.default_mode() if progress is True else (progress or "off")
    workdir = rundir.prepare(Path(workdir))
    with rundir.lock(workdir):
        return _train(config, workdir, mode, stop_after)


def _train(config: DQNConfig, workdir: Path, mode: runlog.Mode, stop_after) -> dict:
    say = print if mode != "off" else (lambda *a, **k: None)
    total = config.train.num_iterations
    run = dqn_trainer.make_trainer(config)
    init = jax.jit(run.init)
    iteration = jax.jit(run.iteration, donate_argnums=0)
    root = jax.random.key(config.seed)
    init_key, iteration_root, eval_key = jax.random.split(root, 3)
    manager = checkpoints.make_manager(workdir, keep=config.keep_checkpoints)
    try:
        resumed = checkpoints.restore_latest_good(
            manager, _abstract(init, init_key),
            quarantine=workdir / checkpoints.QUARANTINE_DIR,
            check_config=lambda stored: check_compatible(stored, config),
            config_type=DQNConfig,
        )
    except BaseException:
        manager.close()
        raise
    state, step = (None, 0) if resumed is None else (resumed.state, resumed.step)
    summary = {"step": step, "workdir": str(workdir), "metrics": {}, "eval": {},
               "state": state, "done": 0, "interrupted": False}
    if state is not None and step >= total:
        manager.close()
        say(f"nothing to do: {workdir} has done {step} iterations and "
            f"--train.num-iterations is {total}; raise it to train on.")
        return summary
    config_lib.save(config, workdir / "config.json")
    if state is None:
        state = init(init_key)
    else:
        say(f"resuming {workdir} from iteration {step} of {total}")
    act = functools.partial(dqn_trainer.q_act, run.apply)
    log = runlog.RunLog(workdir, total, step, mode)

    def iterate(state, done):
        state, device_metrics = iteration(state, jax.random.fold_in(iteration_root, done))
        return state, {k: float(v) for k, v in jax.device_get(device_metrics).items()}

    def evaluate(state, step):
        return state, periodic.evaluate(
            act, state.learner.params, jax.random.fold_in(eval_key, step), config.eval,
            opponents=OPPONENTS,
        )

    summary.update(runloop.run_iterations(
        state=state, step=step, total=total, iterate=iterate, evaluate=evaluate,
        eval_every=config.eval.every, manager=manager, config=config,
        checkpoint_every=config.checkpoint_every, log=log,
        positions_per_iteration=config.train.num_envs * config.train.env_steps,
        resume_hint=_resume_hint(workdir), say=say, stop_after=stop_after,
    ))
    return summary


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
        summary = train_and_evaluate(config, workdir, progress=mode)
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
