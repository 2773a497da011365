"""Orbax checkpoints of a run: the whole ``TrainState`` plus the config as JSON.

Keeps the latest ``keep`` checkpoints and, besides them, the best one by
evaluation score. Saves are asynchronous; ``close`` waits for them.

Training resumes from the whole state (``restore_state``); everything that
only plays (``Player``, the agents of ``c4jax.judge``) reads the network
variables alone (``restore_variables``), so a damaged or incompatible
optimizer or replay part of a checkpoint never blocks playing.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import absl.logging
import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import serialization
from orbax.checkpoint import checkpoint_managers as policies

from c4jax import config as config_lib
from c4jax import network

SCORE = "score"  # metric that ranks checkpoints; higher is better
PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"  # the agent shipped in the package
VARIABLES_FILE = "variables.msgpack"  # an exported network: its variables,
CONFIG_FILE = "config.json"  # the run's configuration,
INFO_FILE = "info.json"  # and how it was made (step, commit, wall time, results)


def make_manager(workdir: Path, *, keep: int) -> ocp.CheckpointManager:
    """A manager for ``workdir/checkpoints`` that keeps the latest and the best."""
    preservation = policies.AnyPreservationPolicy(
        [
            policies.LatestN(n=keep),
            policies.BestN(
                get_metric_fn=lambda metrics: metrics[SCORE],
                reverse=False,
                n=1,
                keep_checkpoints_without_metrics=False,
            ),
        ]
    )
    options = ocp.CheckpointManagerOptions(
        preservation_policy=preservation,
        # best_fn makes Orbax write each checkpoint's metrics to disk, so that
        # a later process (a resume, Player) still knows which one is best.
        best_fn=lambda metrics: metrics[SCORE],
        best_mode="max",
        enable_async_checkpointing=True,
        create=True,
    )
    return ocp.CheckpointManager(
        Path(workdir).absolute() / "checkpoints", options=options, item_names=("state", "config")
    )


def open_for_reading(workdir: Path) -> ocp.CheckpointManager:
    """A read-only manager of ``workdir/checkpoints`` that knows the scores."""
    options = ocp.CheckpointManagerOptions(
        read_only=True, best_fn=lambda metrics: metrics[SCORE], best_mode="max"
    )
    return ocp.CheckpointManager(
        Path(workdir).absolute() / "checkpoints", options=options, item_names=("state", "config")
    )


def save(
    manager: ocp.CheckpointManager, step: int, state, config, score: float | None
) -> None:
    """Starts an async save of ``state`` and ``config`` at ``step`` (replacing one there).

    ``score`` is the evaluation score of this very step, or None if the step
    was not evaluated (then only the "latest" rule keeps it).
    """
    if step in manager.all_steps():
        manager.wait_until_finished()
        manager.delete(step)
    manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            config=ocp.args.JsonSave(config_lib.to_dict(config)),
        ),
        metrics=None if score is None else {SCORE: float(score)},
        force=True,
    )


def restore_config(manager: ocp.CheckpointManager, step: int) -> config_lib.Config:
    """The config stored with checkpoint ``step``."""
    restored = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
    return config_lib.from_dict(restored.config)


def restore_state(manager: ocp.CheckpointManager, step: int, abstract_state):
    """The ``TrainState`` of checkpoint ``step``, placed as ``abstract_state`` says."""
    try:
        restored = manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state))
        )
    except (ValueError, KeyError, TypeError) as err:
        first_line = (str(err).strip().splitlines() or [""])[0][:200]
        raise ValueError(
            f"{manager.directory}: checkpoint {step} does not match this version of "
            f"c4jax's training state ({type(err).__name__}: {first_line})"
        ) from err
    return restored.state


def best_step(manager: ocp.CheckpointManager) -> int | None:
    """The kept step with the highest score (the latest among equals)."""
    scored = []
    for step in manager.all_steps():
        metrics = manager.metrics(step) or {}
        scored.append((metrics.get(SCORE, -float("inf")), step))
    return max(scored)[1] if scored else None


@dataclasses.dataclass(frozen=True)
class NetworkCheckpoint:
    """The network of one checkpoint of a run, without the rest of its training state."""

    config: config_lib.Config  # the run's configuration (network shape, search settings)
    variables: dict  # {'params', 'batch_stats'} network variables, on one device
    step: int  # the training iteration the checkpoint was taken at


def restore_variables(run_dir: str | Path, step: int | None = None) -> NetworkCheckpoint:
    """The network variables (params + batch_stats) of a run's checkpoint, and its config.

    A partial Orbax restore: only the ``learner.params`` and
    ``learner.batch_stats`` subtrees of the saved ``TrainState`` are read; the
    optimizer state, the replay buffer and the self-play games are not.

    Args:
        run_dir: a run directory written by ``python -m c4jax.train``.
        step: which checkpoint; default the best by evaluation score (else the latest).

    Raises:
        ValueError: not a run directory, no checkpoint (at ``step``), or the
            network part does not match the stored configuration.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "checkpoints").is_dir():
        raise ValueError(f"{run_dir}: not a run directory (no checkpoints/ inside)")
    manager = open_for_reading(run_dir)
    try:
        steps = manager.all_steps()
        if not steps:
            raise ValueError(f"{run_dir}: no checkpoint saved yet")
        if step is None:
            step = best_step(manager)
        elif step not in steps:
            raise ValueError(f"{run_dir}: no checkpoint at step {step}; saved: {sorted(steps)}")
        config = restore_config(manager, step)
        target = {"learner": _abstract_variables(config.network)}
        try:
            restored = manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.PyTreeRestore(
                        item=target,
                        restore_args=ocp.checkpoint_utils.construct_restore_args(target),
                        partial_restore=True,
                    )
                ),
            )
        except (ValueError, KeyError, TypeError) as err:
            first_line = (str(err).strip().splitlines() or [""])[0][:200]
            raise ValueError(
                f"{manager.directory}: the network in checkpoint {step} does not match its "
                f"configuration ({type(err).__name__}: {first_line})"
            ) from err
    finally:
        manager.close()
    learner_part = restored.state["learner"]
    variables = {"params": learner_part["params"], "batch_stats": learner_part["batch_stats"]}
    return NetworkCheckpoint(config=config, variables=variables, step=int(step))


def export_network(checkpoint: NetworkCheckpoint, out_dir: str | Path, info: dict) -> Path:
    """Writes a network alone (no optimizer, replay or games) as three small files.

    ``variables.msgpack`` (Flax msgpack of ``{'params', 'batch_stats'}``),
    ``config.json`` (the run's configuration) and ``info.json`` (``info`` plus
    the step). ``load_exported`` reads them back.

    Returns:
        ``out_dir``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    variables = jax.tree.map(np.asarray, jax.device_get(checkpoint.variables))
    (out_dir / VARIABLES_FILE).write_bytes(serialization.msgpack_serialize(variables))
    config_lib.save(checkpoint.config, out_dir / CONFIG_FILE)
    (out_dir / INFO_FILE).write_text(json.dumps({"step": checkpoint.step, **info}, indent=2) + "\n")
    return out_dir


def load_exported(directory: str | Path = PRETRAINED_DIR) -> NetworkCheckpoint:
    """The network written by ``export_network`` (default: the packaged pretrained agent).

    Raises:
        ValueError: the files are missing, or the variables do not fit the
            stored network configuration.
    """
    directory = Path(directory)
    missing = [f for f in (VARIABLES_FILE, CONFIG_FILE) if not (directory / f).is_file()]
    if missing:
        raise ValueError(f"{directory}: not an exported network (missing {', '.join(missing)})")
    config = config_lib.load(str(directory / CONFIG_FILE))
    try:
        variables = serialization.msgpack_restore((directory / VARIABLES_FILE).read_bytes())
    except Exception as err:  # msgpack raises several types on damaged data
        raise ValueError(f"{directory / VARIABLES_FILE}: unreadable ({err})") from None
    expected = _abstract_variables(config.network)
    same = jax.tree.structure(expected) == jax.tree.structure(variables) and all(
        a.shape == np.shape(b)
        for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(variables), strict=True)
    )
    if not same:
        raise ValueError(f"{directory}: the variables do not fit the network in {CONFIG_FILE}")
    info_path = directory / INFO_FILE
    step = json.loads(info_path.read_text()).get("step", 0) if info_path.is_file() else 0
    variables = jax.tree.map(jax.numpy.asarray, variables)
    return NetworkCheckpoint(config=config, variables=variables, step=int(step))


def _abstract_variables(network_config: config_lib.NetworkConfig) -> dict:
    """``{'params', 'batch_stats'}`` of ``jax.ShapeDtypeStruct`` placed on the first device."""
    module = network.make_network(network_config)
    shapes = jax.eval_shape(functools.partial(network.init_variables, module), jax.random.key(0))
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), shapes
    )


def quiet_orbax_logs() -> None:
    """Hides Orbax's absl warnings about read-only checkpoint managers (for command lines)."""
    absl.logging.set_verbosity(absl.logging.ERROR)
