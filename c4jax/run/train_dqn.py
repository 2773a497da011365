"""The value-based training run as a library call: ``train_and_evaluate(config, workdir)``.

``python -m c4jax.dqn.train`` (``c4jax dqn-train``; or ``python -m c4jax.train
--config dqn/NAME``) is its command line. The same run directory as AlphaZero's
(``config.json``, ``metrics.jsonl``, ``tb/``, ``checkpoints/``, the lock), the
same Ctrl-C, damaged-checkpoint fallback and NaN guard (``c4jax.run.loop``).
"""

from __future__ import annotations

import functools
import shlex
from pathlib import Path

import jax
import jax.numpy as jnp

from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn import trainer as dqn_trainer
from c4jax.dqn.config import DQNConfig
from c4jax.judge import periodic
from c4jax.run import loop, rundir, runlog, train_alphazero
from c4jax.store import checkpoints

OPPONENTS = ("random", "win-if-you-can", "lookahead")  # periodic evaluation, agent specs
_STATE_FIELDS = ("model.kind", "model.hidden", "train.num_envs", "train.replay_capacity")


NonFiniteError = loop.NonFiniteError  # the loss or parameters became NaN/inf


def _resume_hint(workdir: Path) -> str:
    return f"python -m c4jax.dqn.train --workdir {shlex.quote(str(workdir))}"


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
    if not isinstance(config, DQNConfig):  # a preset's name, say
        raise TypeError(f"config: got {type(config).__name__} {config!r:.80}; give a DQNConfig,"
                        " e.g. c4jax.dqn.config.load('ddqn')")
    mode = runlog.resolve_mode(progress)
    dqn_config.validate(config)
    workdir = rundir.prepare(Path(workdir))
    with rundir.lock(workdir):
        return _train(config, workdir, mode, stop_after)


def exploration_change(stored: DQNConfig, config: DQNConfig, step: int) -> str | None:
    """The line that says how a resume's new length moves epsilon, or None.

    Epsilon falls over ``epsilon_decay * num_iterations`` iterations: a run
    continued with more iterations explores more again from where it stopped.
    """
    if stored.train.num_iterations == config.train.num_iterations:
        return None
    at = jnp.asarray(step, jnp.float32)
    before = float(dqn_trainer.epsilon_at(stored, at))
    after = float(dqn_trainer.epsilon_at(config, at))
    if abs(after - before) < 5e-3:
        return None
    return (f"note: train.num_iterations is {config.train.num_iterations}, not the"
            f" {stored.train.num_iterations} this run was started with: exploration's decay"
            f" stretches with it, so epsilon at iteration {step} goes from {before:.2f} to"
            f" {after:.2f}")


def _train(config: DQNConfig, workdir: Path, mode: runlog.Mode, stop_after) -> dict:
    say = print if mode != "off" else (lambda *a, **k: None)
    total = config.train.num_iterations
    run = dqn_trainer.make_trainer(config)
    init = jax.jit(run.init)
    iteration = jax.jit(run.iteration, donate_argnums=0)
    root = jax.random.key(config.seed)
    init_key, iteration_root, eval_key = jax.random.split(root, 3)
    manager = checkpoints.make_manager(workdir, keep=config.keep_checkpoints)
    stored_configs: list[DQNConfig] = []

    def check(stored: DQNConfig) -> None:
        train_alphazero.check_resumable(
            stored, config, workdir, _STATE_FIELDS, "python -m c4jax.dqn.train")
        stored_configs.append(stored)

    try:
        resumed = checkpoints.restore_latest_good(
            manager, _abstract(init, init_key),
            quarantine=workdir / checkpoints.QUARANTINE_DIR,
            check_config=check, config_type=DQNConfig,
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
            f"--train.num-iterations is {total}; raise it to train on (exploration's"
            " decay then stretches to the new length).")
        return summary
    train_alphazero.save_config(config, workdir / "config.json")
    if state is None:
        state = init(init_key)
    else:
        say(f"resuming {workdir} from iteration {step} of {total}")
        if stored_configs:
            note = exploration_change(stored_configs[-1], config, step)
            if note:
                say(note)
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

    summary.update(loop.run_iterations(
        state=state, step=step, total=total, iterate=iterate, evaluate=evaluate,
        eval_every=config.eval.every, manager=manager, config=config,
        checkpoint_every=config.checkpoint_every, log=log,
        positions_per_iteration=config.train.num_envs * config.train.env_steps,
        resume_hint=_resume_hint(workdir), say=say, stop_after=stop_after,
    ))
    return summary
