"""The host loop both trainers share (``c4jax.train``, ``c4jax.dqn.train``).

Around a jitted ``iteration`` it adds what a run needs on the host: the wall
time of every iteration, the NaN guard, the periodic evaluation, logging,
checkpoints every few iterations (and at the last one or a stop), and stopping
on a signal: Ctrl-C, SIGTERM (what Colab, TPU VMs, SLURM, Kubernetes and
``docker stop`` send before a SIGKILL) and SIGHUP (a closed terminal) all
finish the iteration, save and stop; a second aborts at once. In a
multi-process run a signal on any process stops all after the same iteration,
with one checkpoint.
"""

from __future__ import annotations

import errno
import math
import signal
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


def _nan_advice(started: int, step: int) -> str:
    """What to do about a NaN at iteration ``step`` of a run resumed at ``started``.

    Every checkpoint is checked (checksums, finite parameters) as it is read, so a
    NaN is the recipe's; but at the very first iteration after a resume it may
    also be the checkpoint's, if it was saved before checkpoints had checksums.
    """
    if started > 0 and step == started + 1:
        return (
            f"This is the first iteration after resuming from checkpoint {started}: if "
            "the run was healthy before, that checkpoint may be damaged (one saved by a "
            "c4jax without checksums cannot be checked); move checkpoints/"
            f"{started} into damaged-checkpoints/ to resume from an earlier one. "
            "Otherwise lower --train.learning-rate or check the config."
        )
    return "Lower --train.learning-rate or check the config, then run again."


def _finite(metrics: dict[str, float]) -> bool:
    return math.isfinite(metrics.get("loss", 0.0)) and metrics.get("params_finite", 1.0) == 1.0


# A SIGTERM's message warns of the SIGKILL that may follow when the iteration (and
# the save) may take longer than this: ``docker stop``'s grace period.
GRACE_SECONDS = 10.0


def stop_message(signum: int, *, seconds: float | None, saved: int | None) -> str:
    """What the trainer says on the first signal ``signum``, in one line.

    Args:
        signum: SIGINT, SIGTERM or SIGHUP.
        seconds: the longest an iteration (with its evaluation and save) has
            taken, None while the first one is still compiling.
        saved: the newest checkpoint's iteration, None if there is none yet.
    """
    if signum == signal.SIGINT:
        return ("Ctrl-C: finishing this iteration, saving a checkpoint, then stopping "
                "(Ctrl-C again aborts at once).")
    name = interrupt.NAMES.get(signum, f"signal {signum}")
    if signum == getattr(signal, "SIGHUP", None):
        name += " (the terminal closed)"
    message = (f"{name}: finishing this iteration, saving a checkpoint, then stopping "
               "(a second signal aborts at once).")
    if signum == signal.SIGTERM and (seconds is None or seconds > GRACE_SECONDS):
        took = ("The first iteration is still compiling" if seconds is None
                else f"An iteration has taken up to {runlog.format_duration(seconds)}")
        kept = f"checkpoint {saved}" if saved is not None else "the start (no checkpoint yet)"
        message += (f" {took}: if a SIGKILL comes first (a cluster's grace period is often "
                    "30 s, docker stop's 10 s), the run continues from "
                    f"{kept}; a longer grace period avoids that.")
    return message


def stopped_by(signum: int) -> int:
    """The signal that stops the run, the same on every process: ``signum`` (0 for
    none) here, the largest of all the processes' when there are several (one tiny
    all-gather per call), so that all stop after the same iteration and save the
    checkpoint together, whichever process got the signal."""
    if jax.process_count() == 1:
        return signum
    from jax.experimental import multihost_utils

    return int(multihost_utils.process_allgather(np.asarray(signum, np.int32)).max())


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
    compiled: bool = False,
    replan: Callable[[int, int], tuple[int, Any] | None] | None = None,
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
        stop_after: stop as a signal would after this many iterations (tests).
        to_checkpoint: the state as it is saved (e.g. the replay buffer in slot order).
        compiled: the iteration is compiled already (a time budget timed it), so
            the first iteration does not wait for a compile and none is announced.
        replan: ``replan(step, total)`` after each iteration, before its evaluation:
            None, or ``(total, config)``, the run's new length (at least ``step``;
            ``step`` ends the run there, evaluated and saved) and the config that
            the checkpoints save from then on (a time budget's count measured
            again, ``c4jax.run.train_alphazero.BudgetReplan``).

    Returns:
        ``step``, the last ``metrics`` and ``eval``, ``state``, ``done``
        (iterations run here), ``interrupted`` (stopped by a signal: Ctrl-C,
        SIGTERM or SIGHUP, on any process) and ``exit_code``, the code a command
        line ends with then (130, 143 or 129; None when not interrupted).

    Raises:
        NonFiniteError: the loss or the parameters became NaN/inf; that
            iteration is neither logged nor saved.

    Whatever is raised (a full disk while saving, say) stays what is raised: the
    checkpoint being written is still waited for and the manager and the log
    closed, and their own failures are attached to it as notes.
    """
    metrics: dict = {}
    last_eval: dict = {}
    started = step
    stopped = 0  # the signal that stopped the run (0: none), agreed by all processes
    # For the stop message, read by the signal thread: how long the first pass
    # through the loop took (compiling included), the longest of the later ones, and
    # the newest checkpoint.
    first: float | None = None
    later: float | None = None
    saved: int | None = step or None

    def took(seconds: float) -> None:
        nonlocal first, later
        if step - started == 1:
            first = seconds
        else:
            later = max(later or 0.0, seconds)

    stop = interrupt.StopRequest(
        asked=lambda signum: stop_message(
            signum, seconds=later if later is not None else first, saved=saved),
        aborted=f"Aborted. Continue from the last checkpoint with: {resume_hint}",
    )
    with stop:
        try:
            if log is not None and not compiled:
                log.compiling("compiling the training step (the first iteration waits for it)...")
            while step < total:
                t0 = time.perf_counter()
                state, metrics = iterate(state, step)
                step += 1
                if not _finite(metrics):
                    newest = manager.latest_step()
                    kept = f"checkpoint {newest} is kept" if newest is not None else "no checkpoint"
                    raise NonFiniteError(
                        f"the loss or the parameters became NaN/inf at iteration {step} "
                        f"(loss {metrics.get('loss')}); stopped without saving it, {kept}. "
                        + _nan_advice(started, step)
                    )
                metrics["seconds"] = time.perf_counter() - t0
                metrics["positions_per_second"] = positions_per_iteration / metrics["seconds"]
                took(metrics["seconds"])  # then again with the evaluation and the save
                planned = replan(step, total) if replan is not None else None
                if planned is not None:
                    total, config = max(step, planned[0]), planned[1]
                    if log is not None:
                        log.set_total(total)
                last_step = step == total
                score = None  # the evaluation score of this step, if evaluated
                if eval_every and (step % eval_every == 0 or last_step):
                    state, last_eval = evaluate(state, step)
                    score = last_eval["score"]
                    metrics.update(last_eval)
                if log is not None:
                    try:
                        log.log(step, metrics)
                    except OSError as err:
                        # A closed terminal fails the progress line (after the metrics
                        # are written) before its SIGHUP is seen, with EIO, or with
                        # EPIPE where output went through a pipe (``| tee``) whose
                        # reader died with the terminal: that line is lost, and the
                        # SIGHUP stops the run as usual.
                        if (err.errno not in (errno.EIO, errno.EPIPE)
                                or not interrupt.leave_lost_terminal()):
                            raise
                stopped = stopped_by(stop.signal or 0)
                interrupted = bool(stopped) or (
                    stop_after is not None and step - started >= stop_after
                )
                if step % checkpoint_every == 0 or last_step or interrupted:
                    checkpoints.save(manager, step, to_checkpoint(state), config, score)
                    saved = step
                took(time.perf_counter() - t0)
                if interrupted:
                    break
        except BaseException as err:
            _close(manager, log, err)
            raise
        # Inside the stop request: a signal while the last checkpoint is written
        # asks (or aborts) as during an iteration.
        _close(manager, log, None)
    if stopped:
        say(f"stopped at iteration {step} of {total} (checkpoint saved); "
            f"continue with: {resume_hint}")
    code = stop.code if stopped == signal.SIGINT else interrupt.exit_code(stopped)
    return {"step": step, "metrics": metrics, "eval": last_eval, "state": state,
            "done": step - started, "interrupted": bool(stopped),
            "exit_code": code if stopped else None}


def _close(manager, log: runlog.RunLog | None, error: BaseException | None) -> None:
    """Waits for the checkpoint being written, closes ``manager`` and ``log``: each
    step even if one before it failed.

    With ``error`` propagating, their own failures are attached to it as notes
    and it stays the one raised (a full disk is not replaced by what the close
    then says about it); without, the first failure is raised.
    """
    steps = [("writing the checkpoint", manager.wait_until_finished),
             ("closing the checkpoints", manager.close)]
    if log is not None:
        steps.append(("closing the logs", log.close))
    first = None
    for what, close in steps:
        try:
            close()
        except Exception as failure:  # noqa: BLE001 - reported with ``error`` or raised below
            if error is not None:
                error.add_note(f"then {what} failed too: {type(failure).__name__}: {failure}")
            elif first is None:
                first = failure
    if first is not None:
        raise first
