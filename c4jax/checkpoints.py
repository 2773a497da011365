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
from pathlib import Path

import absl.logging
import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies

from c4jax import config as config_lib
from c4jax import network

SCORE = "score"  # metric that ranks checkpoints; higher is better


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
