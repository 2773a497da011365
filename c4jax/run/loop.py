"""The host loop both trainers share (``c4jax.train``, ``c4jax.dqn.train``).

Around a jitted ``iteration`` it adds what a run needs on the host: the wall
time of every iteration, the NaN guard, the periodic evaluation, logging,
checkpoints every few iterations (and at the last one or a stop), and Ctrl-C
(the first finishes the iteration and saves, the second aborts; in a
multi-process run a Ctrl-C on any process stops all at the same iteration).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from c4jax.run import interrupt, runlog
from c4jax.store import checkpoints


class NonFiniteError(RuntimeError):
    """The loss or the parameters stopped being finite; nothing after the last good
    checkpoint was saved."""


def _finite(metrics: dict[str, float]) -> bool:
    return math.isfinite(metrics.get("loss", 0.0)) and metrics.get("params_finite", 1.0) == 1.0


def any_process(flag: bool) -> bool:
    """True if ``flag`` is True on any process of the run (one tiny all-gather per
    call when there are several), so that all stop at the same iteration and
    save the checkpoint together, whichever process got the Ctrl-C."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils

    return bool(multihost_utils.process_allgather(np.asarray(flag)).any())


def run_iterations(
    *,
    state: Any,
    step: int,
    total: int,
    iterate: Callable[[Any, int], tuple[Any, dict[str, float]]],
    evaluate: Callable[[Any, int], tuple[Any, dict[str, float]]],
    eval_every: int,
    manager,
    config: Any,
    checkpoint_every: int,
    log: runlog.RunLog | None,
    positions_per_iteration: int,
    resume_hint: str,
    say: Callable[..., None],
    stop_after: int | None = None,
    to_checkpoint: Callable[[Any], Any] = lambda state: state,
) -> dict:
    """Runs iterations ``step + 1 .. total`` of a run.

    Args:
        state: the training state to continue.
        step: iterations done.
        total: iterations to reach.
        iterate: ``iterate(state, step) -> (state, metrics)``, the jitted
            iteration with its metrics fetched to host floats; ``step`` is the
            number done before it.
        evaluate: ``evaluate(state, step) -> (state, results)`` after iteration
            ``step`` every ``eval_every`` iterations (0 = never) and after the
            last; ``results["score"]`` ranks the checkpoint.
        manager, config, checkpoint_every: where, what and how often to save
            (``checkpoints.save``); the last iteration and a stop always save.
        log: the run's ``RunLog`` (None on processes that do not log).
        positions_per_iteration: for the ``positions_per_second`` metric.
        resume_hint: the command that continues the run, for the messages.
        say: prints what the run does (a no-op when quiet).
        stop_after: stop as a Ctrl-C would after this many iterations (tests).
        to_checkpoint: the state as it is saved (e.g. the replay buffer in slot order).

    Returns:
        ``step``, the last ``metrics`` and ``eval``, ``state``, ``done``
        (iterations run here) and ``interrupted`` (stopped by Ctrl-C).

    Raises:
        NonFiniteError: the loss or the parameters became NaN/inf; that
            iteration is neither logged nor saved.
    """
    metrics: dict = {}
    last_eval: dict = {}
    started = step
    by_user = False
    stop = interrupt.StopRequest(
        asked="Ctrl-C: finishing this iteration, saving a checkpoint, then stopping "
        "(Ctrl-C again aborts at once).",
        aborted=f"Aborted. Continue from the last checkpoint with: {resume_hint}",
    )
    try:
        with stop:
            if log is not None:
                log.compiling("compiling the training step (the first iteration waits for it)...")
            while step < total:
                t0 = time.perf_counter()
                state, metrics = iterate(state, step)
                step += 1
                if not _finite(metrics):
                    saved = manager.latest_step()
                    kept = f"checkpoint {saved} is kept" if saved is not None else "no checkpoint"
                    raise NonFiniteError(
                        f"the loss or the parameters became NaN/inf at iteration {step} "
                        f"(loss {metrics.get('loss')}); stopped without saving it, {kept}. "
                        "Lower --train.learning-rate or check the config, then run again."
                    )
                metrics["seconds"] = time.perf_counter() - t0
                metrics["positions_per_second"] = positions_per_iteration / metrics["seconds"]
                last_step = step == total
                score = None  # the evaluation score of this step, if evaluated
                if eval_every and (step % eval_every == 0 or last_step):
                    state, last_eval = evaluate(state, step)
                    score = last_eval["score"]
                    metrics.update(last_eval)
                if log is not None:
                    log.log(step, metrics)
                requested = any_process(stop.requested)
                interrupted = requested or (
                    stop_after is not None and step - started >= stop_after
                )
                if step % checkpoint_every == 0 or last_step or interrupted:
                    checkpoints.save(manager, step, to_checkpoint(state), config, score)
                if interrupted:
                    by_user = requested
                    break
    finally:
        manager.wait_until_finished()
        manager.close()
        if log is not None:
            log.close()
    if by_user:
        say(f"stopped at iteration {step} of {total} (checkpoint saved); "
            f"continue with: {resume_hint}")
    return {"step": step, "metrics": metrics, "eval": last_eval, "state": state,
            "done": step - started, "interrupted": by_user}
