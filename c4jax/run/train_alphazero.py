"""AlphaZero's training run as a library call: ``train_and_evaluate(config, workdir)``.

``python -m c4jax.train`` (``c4jax train``) is its command line; the Colab
notebook and the tests call it directly. The run directory holds
``config.json``, ``metrics.jsonl``, TensorBoard event files (``tb/``) and Orbax
checkpoints (``checkpoints/``); a run continues bit-for-bit from its newest good
checkpoint, a damaged one is moved to ``damaged-checkpoints/``, and a NaN/inf
loss stops the run without saving the broken state. In a multi-process run
(``c4jax.run.distributed``) process 0 alone locks the directory and logs; all
write the checkpoints together, and each evaluates on its own copy of the network.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shlex
import statistics
import time
from pathlib import Path

import jax
import numpy as np

from c4jax import inputs
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import search, trainer
from c4jax.alphazero.config import Config
from c4jax.judge import periodic
from c4jax.run import distributed, loop, rundir, runlog, xla_flags
from c4jax.store import checkpoints

# Measured wall times of the presets on CPUs: what expected_time() reads.
TIMINGS = config_lib.PRESET_DIR / "timings" / "cpu.json"

NonFiniteError = loop.NonFiniteError  # the loss or parameters became NaN/inf

# Fields a checkpoint's arrays depend on: they cannot change when resuming. (The
# surprise options only shape the state by being on or off; kept whole for a plain rule.)
_STATE_FIELDS = (
    "network.num_blocks",
    "network.channels",
    "network.kernel_size",
    "network.value_channels",
    "network.opponent_head",
    "network.final_board_head",
    "network.global_pool",
    "network.threat_planes",
    "train.selfplay_batch",
    "train.replay_capacity",
    "train.optimizer",
    "train.policy_surprise_weight",
    "train.surprise_starts",
    "train.surprise_pool",
)


def check_compatible(stored: Config, requested: Config) -> None:
    """Raises ValueError naming each field that a resumed checkpoint cannot change."""
    config_lib.check_unchanged(stored, requested, _STATE_FIELDS)


def check_resumable(stored, requested, workdir: Path, fields: tuple[str, ...],
                    command: str) -> None:
    """Raises ValueError when ``requested`` changes one of ``fields`` (dotted) of
    ``stored``, the config a checkpoint of the run in ``workdir`` was trained with.

    When the run's own ``config.json`` holds the changed values (it was edited
    after the checkpoint was saved), the message says so, names the fields and
    both values, and gives the command (``command``, the trainer's) that continues
    with the checkpoint's values (written to config.json once it trains); otherwise (the
    changes came from the command line) it is ``config_lib.check_unchanged``'s.
    """
    changed = [n for n in fields if config_lib.field_value(stored, n)
               != config_lib.field_value(requested, n)]
    if not changed:
        return
    path = Path(workdir) / "config.json"
    try:
        on_disk = config_lib.load(str(path), cls=type(requested))
    except (OSError, ValueError):
        on_disk = None
    if on_disk is None or any(config_lib.field_value(on_disk, n)
                              != config_lib.field_value(requested, n) for n in changed):
        config_lib.check_unchanged(stored, requested, fields)  # overrides on the command line

    def values(config) -> str:
        return ", ".join(f"{n} {config_lib.field_value(config, n)!r}" for n in changed)

    flags = " ".join(_flag(n, config_lib.field_value(stored, n)) for n in changed)
    raise ValueError(
        f"{path} says {values(requested)}, but the checkpoints in {path.parent / 'checkpoints'} "
        f"were trained with {values(stored)} (config.json was edited since); a run cannot "
        "change these when it continues. Continue with the checkpoints' values (config.json "
        f"takes them again once it trains): {command} --workdir {shlex.quote(str(workdir))} "
        f"{flags}; or train the new values in a new --workdir"
    )


def _flag(dotted: str, value) -> str:
    """The command-line words that set field ``dotted`` to ``value`` (a boolean is a
    flag pair taking no value: ``--network.opponent-head``, ``--network.no-opponent-head``)."""
    section, _, name = dotted.rpartition(".")
    if isinstance(value, bool):
        name = name if value else f"no-{name}"
        return "--" + (f"{section}.{name}" if section else name).replace("_", "-")
    return f"--{dotted.replace('_', '-')} {shlex.quote(str(value))}"


def _resume_hint(workdir: Path) -> str:
    return f"python -m c4jax.train --workdir {shlex.quote(str(workdir))}"


def _restore(manager, run: trainer.Trainer, config: Config, workdir: Path):
    """The newest good checkpoint's state and step, or (None, 0) for a new run.

    A run resumed with ``eval.gating`` on that trained without it starts gating from
    the network it has trained (the state's best network had not followed it).
    """
    mover = jax.process_index() == 0  # one process moves damaged checkpoints aside
    resumed = checkpoints.restore_latest_good(
        manager,
        run.abstract_state(),
        quarantine=workdir / checkpoints.QUARANTINE_DIR if mover else None,
        check_config=lambda stored: check_resumable(
            stored, config, workdir, _STATE_FIELDS, "python -m c4jax.train"),
    )
    if jax.process_count() > 1:
        # The others still list what process 0 moved aside until they read the folder
        # again: saving that step later, they alone would delete it first, and the
        # processes' checkpoint barriers would no longer match.
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("c4jax: damaged checkpoints moved aside")
        manager.reload()
    if resumed is None:
        return None, 0
    state = run.from_checkpoint(resumed.state)
    if config.eval.gating and not resumed.config.eval.gating:
        # Without gating nothing kept the best network up to date (it is still the
        # first one): the network trained so far is the one self-play starts from.
        state = run.promote(state)
    return state, resumed.step


def train_and_evaluate(
    config: Config,
    workdir: str | Path,
    *,
    progress: bool | runlog.Mode = False,
    stop_after: int | None = None,
    corrupt=None,
) -> dict:
    """Trains (or continues) the run in ``workdir`` up to ``config.train.num_iterations``.

    Args:
        config: the run's configuration (validated here).
        workdir: run directory; the newest good checkpoint there is continued
            (a damaged one is moved to ``damaged-checkpoints/`` with a warning).
        progress: ``bar``, ``lines`` or ``off``; True picks ``bar`` on a
            terminal and ``lines`` otherwise. Any mode but ``off`` also prints
            what the run does (resuming, compiling, nothing to do, stopping).
        stop_after: stop (saving a checkpoint) after this many iterations of
            this call, as a Ctrl-C would; for tests of interruption.
        corrupt: for tests of the NaN guard: ``corrupt(state, done) -> state``
            applied to the state before each iteration (``done`` iterations done).

    Returns:
        A summary: ``step``, ``workdir``, the last ``metrics`` and ``eval``, the
        final ``state`` (a ``TrainState``; the restored one if nothing was done), ``done``
        (iterations this call did) and ``interrupted`` (stopped by Ctrl-C).

    Raises:
        TypeError: ``config`` is not a ``Config`` (a preset's name: load it first).
        ValueError: an unusable run directory (path, lock, incompatible or
            all-damaged checkpoints), or a bad ``progress``, before anything compiles.
        NonFiniteError: the loss or parameters became NaN/inf; the last good
            checkpoint is kept and nothing later is saved.
    """
    if not isinstance(config, config_lib.Config):  # a preset's name, say
        raise TypeError(f"config: got {type(config).__name__} {config!r:.80}; give a Config,"
                        " e.g. c4jax.alphazero.config.load('cpu')")
    mode = runlog.resolve_mode(progress)
    if config.distributed and not jax.distributed.is_initialized():
        distributed.initialize()  # before anything asks JAX about devices
    writer = jax.process_index() == 0  # one process writes the logs
    mode = mode if writer else "off"
    say = print if mode != "off" else (lambda *a, **k: None)
    started = time.monotonic()
    config_lib.validate(config, num_devices=jax.device_count())
    workdir = rundir.prepare(Path(workdir))
    with rundir.lock(workdir) if writer else contextlib.nullcontext():
        return _train(config, workdir, mode, say, writer, stop_after, corrupt, started)


def _train(config, workdir, mode, say, writer, stop_after, corrupt, started) -> dict:
    manager = checkpoints.make_manager(workdir, keep=config.keep_checkpoints)
    act = None  # the evaluation's agent, when fitting the time budget built (and compiled) it
    most = config.train.num_iterations  # a time budget's largest count
    try:
        if config.train.time_budget and manager.all_steps():
            config = budget_of_started_run(config, workdir)
            say(f"time budget {config.train.time_budget}: the run keeps the "
                f"{config.train.num_iterations} iterations it chose when it started")
        run = trainer.shared_trainer(config)
        state, step = _restore(manager, run, config, workdir)
        if config.train.time_budget and state is None:
            config, act = fit_time_budget(config, run, started, say)
            run = trainer.shared_trainer(config)  # the same programs, the count chosen
    except BaseException:
        manager.close()
        raise
    fitted = act is not None  # the time budget ran (and so compiled) the iteration
    total = config.train.num_iterations
    summary = {"step": step, "workdir": str(workdir), "metrics": {}, "eval": {},
               "state": state, "done": 0, "interrupted": False}
    if step >= total and state is not None:
        manager.close()
        if config.train.time_budget:  # the count is the budget's, whatever is asked
            say(f"nothing to do: {workdir} has done {step} iterations, the {total} its "
                f"time budget ({config.train.time_budget}) chose; to train on, give "
                "--train.time-budget '' and a larger --train.num-iterations (the learning-rate "
                "schedule then stretches to it).")
        else:
            say(f"nothing to do: {workdir} has done {step} iterations and "
                f"--train.num-iterations is {total}; raise it to train on.")
        return summary
    if writer:
        save_config(config, workdir / "config.json")
    if state is None:
        state = run.init(trainer.run_keys(config.seed)[0])
    else:
        say(f"resuming {workdir} from iteration {step} of {total}")
    act = act or search.make_alphazero_act(
        run.apply_fn, config.search, num_simulations=config.eval.num_simulations
    )
    eval_key = trainer.run_keys(config.seed)[2]
    log = runlog.RunLog(workdir, total, step, mode) if writer else None

    def iterate(state, done):
        if corrupt is not None:
            state = corrupt(state, done)
        state, device_metrics = run.iteration(state, trainer.iteration_key(config.seed, done))
        return state, {k: float(v) for k, v in jax.device_get(device_metrics).items()}

    evaluated = 0.0  # the last evaluation's wall time, for a time budget's second look

    def evaluate(state, step):
        nonlocal evaluated
        begin = time.monotonic()
        variables = _process_local(run.variables(state))
        match_key, gate_key = jax.random.split(jax.random.fold_in(eval_key, step))
        results = periodic.evaluate(act, variables, match_key, config.eval)
        if config.eval.gating:
            gate = periodic.gating_match(
                act, variables, _process_local(state.best), gate_key,
                num_games=config.eval.gating_games,
            )
            results["gating/score"] = gate.score
            results["gating/promoted"] = float(gate.score > config.eval.gating)
            if gate.score > config.eval.gating:
                state = run.promote(state)
        evaluated = time.monotonic() - begin
        return state, results

    replan = None
    if fitted:  # a new run that timed its budget: measure it again as it goes
        def recount(count):
            nonlocal config
            train = dataclasses.replace(config.train, num_iterations=count)
            config = dataclasses.replace(config, train=train)
            run.iteration = trainer.CountedIteration(run.iteration.jitted, count)
            if writer:
                save_config(config, workdir / "config.json")
            return config

        replan = BudgetReplan(
            budget=inputs.parse_duration(config.train.time_budget, name="train.time_budget"),
            text=config.train.time_budget, started=started, total=total, most=most,
            eval_every=config.eval.every, evaluation=lambda: evaluated,
            recount=recount, say=log.note if log is not None else say)

    summary.update(loop.run_iterations(
        state=state, step=step, total=total, iterate=iterate, evaluate=evaluate,
        eval_every=config.eval.every, manager=manager, config=config,
        checkpoint_every=config.checkpoint_every, log=log,
        positions_per_iteration=config.train.selfplay_batch * config.train.selfplay_steps,
        resume_hint=_resume_hint(workdir), say=say, stop_after=stop_after,
        to_checkpoint=run.to_checkpoint, compiled=fitted, replan=replan,
    ))
    return summary


# --- A time budget: the iteration count from the measured speed of the first iterations. ---

CALIBRATION_ITERATIONS = 3  # timed after the one that compiles (their median counts)


def iterations_for_budget(budget: float, *, elapsed: float, iteration: float,
                          evaluation: float, eval_every: int, most: int) -> int:
    """How many iterations fit in ``budget`` seconds of wall time, at most ``most``.

    What is left after ``elapsed`` (the time already spent, compiling included: the
    run reuses the programs the timing compiled) is shared out between iterations of
    ``iteration`` seconds, each with its share of an evaluation of ``evaluation``
    seconds every ``eval_every`` iterations (0: none), and the evaluation after the
    last one. Can be 0 (nothing fits).
    """
    left = budget - elapsed - (evaluation if eval_every else 0.0)
    each = iteration + (evaluation / eval_every if eval_every else 0.0)
    return max(0, min(most, math.floor(left / each)))


def fit_time_budget(config: Config, run: trainer.Trainer, started: float, say):
    """A new run's iteration count from ``config.train.time_budget``: times the first
    iterations of a throwaway state (compiling first) and an evaluation, with its
    gating match when ``eval.gating`` is on (twice: with and without compiling), and
    returns ``(config, act)``: the config with the count that fits (at most
    ``train.num_iterations``), and the evaluation's agent, compiled.

    ``started`` is the ``time.monotonic()`` the run began at: the budget counts from it.
    The run itself then reuses the compiled iteration (the count is an argument of it,
    ``trainer.CountedIteration``). In a multi-process run the count is process 0's, so
    that all agree.

    Raises:
        ValueError: naming ``train.time_budget``, when not one iteration fits.
    """
    text = config.train.time_budget
    budget = inputs.parse_duration(text, name="train.time_budget")
    most = config.train.num_iterations
    say(f"time budget {text}: timing {CALIBRATION_ITERATIONS} iterations (after compiling) "
        "and an evaluation to choose the iteration count")
    state = run.init(trainer.run_keys(config.seed)[0])
    seconds = []
    for i in range(1 + CALIBRATION_ITERATIONS):
        begin = time.perf_counter()
        state, metrics = run.iteration(state, trainer.iteration_key(config.seed, i))
        jax.block_until_ready(metrics)
        seconds.append(time.perf_counter() - begin)
    iteration = statistics.median(seconds[1:])
    compiling = max(0.0, seconds[0] - iteration)
    act = search.make_alphazero_act(
        run.apply_fn, config.search, num_simulations=config.eval.num_simulations
    )
    evaluation = 0.0
    if config.eval.every:
        variables = _process_local(run.variables(state))
        # The evaluation key of an iteration no run reaches (inputs.MAX_STEP < 2**31 - 1).
        key = jax.random.fold_in(trainer.run_keys(config.seed)[2], 2**31 - 1)
        for _ in range(2):  # the first compiles; the run reuses it (the same act)
            begin = time.perf_counter()
            periodic.evaluate(act, variables, key, config.eval)
            if config.eval.gating:  # part of every evaluation of such a run
                periodic.gating_match(act, variables, variables, key,
                                      num_games=config.eval.gating_games)
            evaluation = time.perf_counter() - begin
    count = iterations_for_budget(
        budget, elapsed=time.monotonic() - started, iteration=iteration,
        evaluation=evaluation, eval_every=config.eval.every, most=most)
    if jax.process_count() > 1:  # the processes' clocks differ: process 0 decides
        from jax.experimental import multihost_utils

        count = int(multihost_utils.broadcast_one_to_all(np.int32(count)))
    measured = (f"compiling took {runlog.format_duration(compiling)}, an iteration "
                f"{iteration:.1f} s" + (f", an evaluation {evaluation:.1f} s every "
                                        f"{config.eval.every}" if config.eval.every else ""))
    if count < 1:
        raise ValueError(f"train.time_budget: {text} leaves no time for an iteration here "
                         f"({measured}); give a longer budget, or --train.time-budget '' "
                         "and --train.num-iterations N")
    say(f"time budget {text}: {measured}, so {count} iterations"
        + (" (the most allowed, train.num_iterations)" if count == most else
           f" of at most {most}") + "; the count is kept in config.json for resuming")
    train = dataclasses.replace(config.train, num_iterations=count)
    return dataclasses.replace(config, train=train), act


# A time budget's count is measured again at REPLAN_FRACTIONS of the way in (no sooner
# than iteration REPLAN_MIN_STEP), from the pace since the look before: the first
# iterations of a run can be slower than the later ones (9-13% on some CPUs), and the
# count they chose left that share of the budget unused. Not after half way, where a
# longer run would move the learning-rate schedule's annealing.
REPLAN_FRACTIONS = (0.1, 0.25, 0.5)
REPLAN_MIN_STEP = 20
# A new count within this share of the current one (or one iteration) is not taken: the
# pace's noise would otherwise move the count by an iteration or two at every look.
REPLAN_SLACK = 0.005


def replanned_count(budget: float, *, elapsed: float, done: int, seconds_each: float,
                    evaluation: float, most: int) -> int:
    """A run's length once ``done`` iterations have taken ``elapsed`` seconds of
    ``budget`` since its launch: ``done`` and as many more as fit in what is left at
    ``seconds_each`` seconds each (wall time, their share of the evaluations and the
    saves included), less one evaluation of ``evaluation`` seconds (the one after the
    last iteration); between ``done`` and ``most``."""
    return done + iterations_for_budget(budget - evaluation, elapsed=elapsed,
                                        iteration=seconds_each, evaluation=0.0,
                                        eval_every=0, most=most - done)


class BudgetReplan:
    """``replan(step, total)`` for ``loop.run_iterations``: the time budget's count
    measured again a few times early in the run, each time from the wall time of the
    iterations since the look before.

    It looks at steps ``max(REPLAN_MIN_STEP, f * total)`` for ``f`` in
    ``REPLAN_FRACTIONS`` (``total``: the count the budget chose), and not at one that is
    the run's last or beyond. The first look times the iterations since a whole number
    of evaluation periods earlier (about half way to it), so that the evaluations'
    share is in the pace. A count within ``REPLAN_SLACK`` of the current one (or one
    iteration) is not taken. ``recount(count)`` applies a new count (the iteration's length
    argument, config.json) and returns the config the checkpoints then save. In a
    multi-process run process 0's count is everyone's.

    Args:
        budget, text: the budget in seconds and as given (for the messages).
        started: the ``time.monotonic()`` the run was launched at.
        total: the count the budget chose when the run started.
        most: the largest count allowed (``train.num_iterations`` as given).
        eval_every: the evaluation period (0: none).
        evaluation: returns the last evaluation's wall time in seconds.
        recount, say: apply the new count; print a message.
        clock: ``time.monotonic``, or a stand-in (tests).
    """

    def __init__(self, *, budget: float, text: str, started: float, total: int, most: int,
                 eval_every: int, evaluation, recount, say, clock=time.monotonic):
        self.budget, self.text, self.started, self.most = budget, text, started, most
        self.evaluation, self.recount, self.say, self.clock = evaluation, recount, say, clock
        self.looks = sorted({max(REPLAN_MIN_STEP, round(f * total)) for f in REPLAN_FRACTIONS})
        span = self.looks[0] // 2
        if eval_every and span >= eval_every:
            span -= span % eval_every
        self.since = self.looks[0] - span  # the first window: iterations since + 1 ..
        self.marks: dict[int, float] = {}  # the clock after the window starts and the looks

    def __call__(self, step: int, total: int):
        if step != self.since and step not in self.looks:
            return None
        now = self.marks[step] = self.clock()
        if step not in self.looks or step >= total:
            return None
        begun = max(s for s in self.marks if s < step)  # the look before, or ``since``
        each = (now - self.marks[begun]) / (step - begun)
        count = replanned_count(self.budget, elapsed=now - self.started, done=step,
                                seconds_each=each, evaluation=self.evaluation(),
                                most=self.most)
        if jax.process_count() > 1:  # the processes' clocks differ: process 0 decides
            from jax.experimental import multihost_utils

            count = int(multihost_utils.broadcast_one_to_all(np.int32(count)))
        keep = abs(count - total) <= max(1, REPLAN_SLACK * total)
        self.say(f"time budget {self.text}: iterations {begun + 1}-{step} took "
                 f"{each:.2f} s each (evaluations and saves included) and "
                 f"{runlog.format_duration(now - self.started)} have passed, so "
                 + (f"the run keeps its {total} iterations" if keep else
                    f"{count} iterations in all, not {total}; config.json keeps the new "
                    "count for resuming"))
        if keep:
            return None
        return count, self.recount(count)


def budget_of_started_run(config: Config, workdir: Path) -> Config:
    """``config`` with the iteration count that the run in ``workdir`` chose for its time
    budget when it started (its ``config.json``), so that a resume continues the same
    learning-rate schedule.

    Raises:
        ValueError: naming ``train.time_budget``, when the run started without this
            budget (or its config.json cannot be read).
    """
    path = Path(workdir) / "config.json"
    try:
        stored = config_lib.load(str(path), cls=type(config))
    except (OSError, ValueError):
        stored = None
    if stored is None or stored.train.time_budget != config.train.time_budget:
        was = "no time budget" if stored is None or not stored.train.time_budget else (
            f"a time budget of {stored.train.time_budget}")
        raise ValueError(
            f"train.time_budget: the run in {workdir} started with {was}, and a resume keeps "
            "its iteration count (its learning-rate schedule); give the same budget, or "
            "--train.time-budget '' with --train.num-iterations N")
    train = dataclasses.replace(config.train, num_iterations=stored.train.num_iterations)
    return dataclasses.replace(config, train=train)


def save_config(config, path: Path) -> None:
    """Writes ``config`` as the run's ``config.json`` (``config_lib.save``'s JSON), whole or
    not at all (a full disk leaves the old file), and not when it already holds it.

    Raises:
        OSError: naming ``path``.
    """
    text = json.dumps(config_lib.to_dict(config), indent=2) + "\n"
    try:
        if path.read_text() == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    rundir.write_atomic(path, text)


def _process_local(tree):
    """This process's copy of replicated (global) arrays, for the evaluation.

    Every process evaluates on its own copy, with the same keys, so all reach the
    same scores and gating decisions without talking to each other; a global
    array would make every evaluation game a program over all the processes.
    """
    return jax.tree.map(lambda x: x.addressable_data(0), tree)


def default_preset() -> str:
    """The preset for the hardware found: cpu, gpu or tpu."""
    backend = jax.default_backend()
    return {"gpu": "gpu", "tpu": "tpu"}.get(backend, "cpu")


def cpu_timings(path: str | Path = TIMINGS) -> dict[str, list[dict]]:
    """Per preset, the measurements of ``configs/timings/cpu.json``: each names its
    ``hardware`` (``cpu``, ``cores``), ``jax`` version, ``xla_path`` ("fast": YNNPACK
    fusion, or "default"), ``compile_seconds``, ``seconds_per_iteration``, whether it
    was ``measured`` (or derived) and the ``command`` it came from."""
    return json.loads(Path(path).read_text())["presets"]


def expected_time(config: Config, preset: str | None, iterations: int,
                  timings: dict[str, list[dict]] | None = None) -> str:
    """The start-up line with the run's expected wall time, where one was measured.

    Only for a preset's configuration (any ``seed`` and ``train.num_iterations``) on a
    CPU, from the measurements of ``timings`` (default: ``cpu_timings()``) on this
    process's XLA code path; where several machines were measured, the range
    between them. It is a figure for an idle machine of the named type: the
    progress line's ETA, measured on this machine, takes over once iterations run.
    """
    later = "expected time: shown once the first iterations have run"
    if jax.default_backend() != "cpu" or preset is None:
        return later
    path = "fast" if xla_flags.fast_cpu_on() else "default"
    entries = [e for e in (timings or cpu_timings()).get(preset, []) if e["xla_path"] == path]
    if not entries:
        return later
    same = lambda c: dataclasses.replace(  # noqa: E731
        c, seed=0, train=dataclasses.replace(c.train, num_iterations=1)
    )
    if same(config) != same(config_lib.load(preset)):
        return later
    entries.sort(key=lambda e: e["compile_seconds"] + iterations * e["seconds_per_iteration"])
    fastest, slowest = entries[0], entries[-1]

    def span(seconds: list[float]) -> str:
        low, high = (runlog.format_duration(s) for s in (min(seconds), max(seconds)))
        return low if low == high else f"{low} to {high}"

    totals = [e["compile_seconds"] + iterations * e["seconds_per_iteration"] for e in entries]
    cores = "/".join(str(c) for c in sorted({e["hardware"]["cores"] for e in entries}))
    machines = dict.fromkeys(e["hardware"]["cpu"] for e in (fastest, slowest))
    measured = [e.get("measured", True) for e in entries]
    how = "measured" if all(measured) else "partly estimated" if any(measured) else "estimated"
    return (
        f"expected time: about {span(totals)} on an idle {cores}-core CPU "
        f"({' to '.join(machines)}, {how}; compiling first: about "
        f"{span([e['compile_seconds'] for e in entries])}); the progress line's ETA takes "
        "over once iterations run"
    )
