"""The one command line of both trainers.

``python -m c4jax.train`` (``c4jax train``) and ``python -m c4jax.dqn.train``
(``c4jax dqn-train``) are both ``train_main``: the run-level flags (``--config``,
``--workdir``, ``--resume``, ``--no-progress``, ``--print-config`` and, for
AlphaZero, the multi-process flags) and every field of the run's configuration
are options of one tyro parser, so ``--help`` lists them all and tyro's own
suggestions reach a misspelt flag. Which trainer runs is read from the run's
``config.json`` (``"algorithm": "dqn"`` marks a value-based run) or from the
configuration asked for (``c4jax/configs/dqn/*.json`` are the value-based presets:
``--config dqn/grogu`` in ``python -m c4jax.train``, ``--config grogu`` in
``python -m c4jax.dqn.train``); ``python -m c4jax.train`` trains either kind,
``python -m c4jax.dqn.train`` value-based runs only.

A ``--workdir`` that holds files but is not a c4jax run (``rundir.check_ours``)
is refused before anything is written, unless ``--force-workdir`` is given.

Exit codes: 0 done (or nothing to do), 1 the run failed (NaN/inf loss, a lost
process), 2 bad input (a flag, a config file, a run directory), 74 (``EXIT_IO``,
sysexits' EX_IOERR) a file of the run could not be written (a full disk or
quota, a read-only file or file system, an I/O error: one ``error:`` line names
the file and the newest checkpoint saved), 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import errno
import importlib.util
import json
import logging
import os
import re
import shlex
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import tyro

from c4jax import schema
from c4jax.alphazero import config as config_lib
from c4jax.alphazero.config import Config
from c4jax.dqn import config as dqn_config
from c4jax.dqn.config import DQNConfig
from c4jax.run.cli import one_line_warnings, tyro_cli
from c4jax.store import outputs

RUNS_DIR = Path("runs")  # where new runs go, and where --resume looks
EXIT_IO = outputs.EXIT_IO  # 74, sysexits' EX_IOERR: a file of the run could not be written
# The errors of a file that cannot be written (not of a bug): exit EXIT_IO, one line.
# EBUSY: a file replaced whole (metrics.jsonl on resume) that is a mount point.
_IO_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
              errno.EIO, errno.EFBIG, errno.EBUSY}
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _option(metavar: str | None = None, hint: str | None = None, **kwargs):
    """``tyro.conf.arg`` for a run-level flag: its help on one line, its default's words."""
    return tyro.conf.arg(metavar=metavar, help_behavior_hint=hint, **kwargs)


_SWITCH = tyro.conf.FlagCreatePairsOff  # --resume alone, no --no-resume


@dataclasses.dataclass(frozen=True)
class _RunFlags:
    """The run-level flags both trainers take (not part of the run's configuration)."""

    config: Annotated[str | None, _option(
        "NAME|PATH", "(default: named above)",
        help="A preset (listed above) or a JSON file: the defaults of every field below. "
        "Without it, a run directory's config.json supplies them, else the default preset.",
    )] = None
    workdir: Annotated[Path | None, _option(
        "DIR", "(default: a new folder in runs/)",
        help="The run directory. A run already there is continued from its newest good "
        "checkpoint, its config.json giving the defaults (no other flag is needed).",
    )] = None
    resume: Annotated[bool, _SWITCH, _option(
        help="Continue --workdir or, without it, the run in runs/ written to last "
        "(named at start-up).",
    )] = False
    no_progress: Annotated[bool, _SWITCH, _option(
        help="One plain line per iteration instead of a progress bar.",
    )] = False
    print_config: Annotated[bool, _SWITCH, _option(
        help="Print the resolved configuration as JSON and exit: nothing is trained or written.",
    )] = False
    force_workdir: Annotated[bool, _SWITCH, _option(
        help="Use --workdir although it holds files that are not a c4jax run (refused "
        "without it): its config.json and metrics.jsonl are then replaced.",
    )] = False


@dataclasses.dataclass(frozen=True)
class AlphaZeroCommand(_RunFlags):
    """``python -m c4jax.train`` on an AlphaZero run."""

    coordinator: Annotated[str | None, _option(
        "HOST:PORT", "(optional)",
        help="A multi-process run without a cluster manager: the coordinator that process 0 "
        "starts, the same for all (HOST reachable from every host). Implies --distributed.",
    )] = None
    num_processes: Annotated[int | None, _option(
        "N", "(optional)",
        help="A multi-process run: how many processes take part (one per host, or per GPU). "
        "Implies --distributed.",
    )] = None
    process_id: Annotated[int | None, _option(
        "I", "(optional)",
        help="A multi-process run: this process's number, 0..N-1 (process 0 writes the logs). "
        "Implies --distributed.",
    )] = None
    run: Annotated[Config, tyro.conf.arg(name="")] = dataclasses.field(default_factory=Config)


@dataclasses.dataclass(frozen=True)
class ValueBasedCommand(_RunFlags):
    """A value-based run (``python -m c4jax.dqn.train``, or ``python -m c4jax.train`` on one)."""

    run: Annotated[DQNConfig, tyro.conf.arg(name="")] = dataclasses.field(
        default_factory=DQNConfig
    )


_ALPHAZERO, _DQN = "alphazero", "dqn"
# What each command is called, and which command trains each kind of run.
PROG = {_ALPHAZERO: "python -m c4jax.train", _DQN: "python -m c4jax.dqn.train"}
_KIND_NAME = {_ALPHAZERO: "AlphaZero", _DQN: "value-based"}
_WHAT = {_ALPHAZERO: "an AlphaZero", _DQN: "a value-based"}
_VALUE_BASED_PREFIX = "dqn/"  # --config dqn/NAME in python -m c4jax.train


def _value_based_presets() -> list[str]:
    return [_VALUE_BASED_PREFIX + name for name in dqn_config.preset_names()]


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What the command line asked for."""

    config: Any  # a Config, or a DQNConfig when kind is "dqn"
    workdir: Path
    source: str  # where the defaults came from: "preset cpu" or the run's config.json
    preset: str | None  # the preset's name, if the defaults came from one
    progress: str  # runlog.Mode: "bar" or "lines"
    print_config: bool  # print the resolved configuration and exit
    cluster: Any  # distributed.Cluster | None: --coordinator, --num-processes, --process-id
    kind: str = _ALPHAZERO  # which trainer: "alphazero" or "dqn"
    picked: str | None = None  # what --resume picked, to print first


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The command line read up to what needs no JAX: the kind, the run directory,
    where the defaults come from; the rest (tyro, the default preset) may ask JAX."""

    command: str
    kind: str
    workdir: Path
    stored: Path | None  # the run directory's config.json, when it supplies the defaults
    config_name: str | None  # --config
    rest: list[str]  # the arguments for tyro (multi-process flags taken out)
    cluster: Any
    no_progress: bool
    print_config: bool
    picked: str | None
    force_workdir: bool = False


class _PreParser(argparse.ArgumentParser):
    def error(self, message: str):  # one ValueError line, not argparse's usage and exit
        raise ValueError(re.sub(r"^argument ([^:]+): ", r"\1: ", message))


def _pre_parse(argv: list[str]) -> argparse.Namespace:
    """``--config``, ``--workdir`` and the switches, read before tyro (they pick its defaults)."""
    pre = _PreParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    pre.add_argument("--workdir", default=None)
    for switch in ("--resume", "--no-progress", "--print-config", "--force-workdir"):
        pre.add_argument(switch, action="store_true")
    return pre.parse_known_args(argv)[0]


def _config_path(name: str, preset_dir: Path) -> Path:
    """The file ``--config NAME`` names (as ``config_lib.load`` resolves it)."""
    return schema.config_path(name, preset_dir)


def _config_kind(name: str, command: str) -> str:
    """Which trainer the configuration ``--config name`` is for ("dqn": value-based):
    a value-based preset, a file with ``"algorithm": "dqn"`` (a run's config.json) or
    sections only one of the two has; else the command's own."""
    preset_dir = dqn_config.PRESET_DIR if command == _DQN else config_lib.PRESET_DIR
    path = _config_path(name, preset_dir)
    if not path.is_file():
        presets = ", ".join(config_lib.preset_names(preset_dir))
        more = "" if command == _DQN else "; value-based: " + ", ".join(_value_based_presets())
        raise ValueError(f"--config {name}: no such file; presets: {presets}{more}")
    if path.resolve().parent == dqn_config.PRESET_DIR.resolve():
        return _DQN
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return command  # loading it says what is wrong
    if not isinstance(data, dict):
        return command
    if data.get("algorithm") == dqn_config.ALGORITHM:
        return _DQN
    if "network" in data or "search" in data:  # sections only AlphaZero's config has
        return _ALPHAZERO
    if "model" in data:  # and only the value-based one
        return _DQN
    return command


def _run_kind(workdir: Path) -> str:
    return _DQN if dqn_config.is_dqn_run(workdir) else _ALPHAZERO


def _newest(kind_wanted: str | None) -> Path:
    """The run in ``RUNS_DIR`` written to last (of ``kind_wanted``, if given)."""
    from c4jax.run import rundir

    if kind_wanted is None:
        return rundir.newest_run(RUNS_DIR)
    runs = [p for p in RUNS_DIR.glob("*") if (p / "config.json").is_file()
            and _run_kind(p) == kind_wanted]
    if not runs:
        raise ValueError(f"--resume: no {_KIND_NAME[kind_wanted]} run directory with a "
                         f"config.json under {RUNS_DIR}/")
    return max(runs, key=rundir.last_active)


def resolve(argv: list[str], command: str) -> _Plan:
    """The first half of ``parse_train_args``, before anything asks JAX about devices.

    ``command`` is "alphazero" (``python -m c4jax.train``: either kind of run) or
    "dqn" (``python -m c4jax.dqn.train``: value-based runs only).

    Raises:
        ValueError: one line naming the flag, or the command that trains the run.
    """
    from c4jax.run import distributed

    if command == _ALPHAZERO:
        cluster, rest = distributed.parse_flags(argv)
    else:
        cluster, rest = None, list(argv)
    known = _pre_parse(rest)
    picked = None
    if known.workdir is not None:
        workdir = Path(known.workdir)
    elif known.resume:
        workdir = _newest(None if command == _ALPHAZERO else _DQN)
        picked = f"--resume: continuing {workdir}, the run in {RUNS_DIR}/ written to last"
    else:  # a new run, named below once its kind is known
        workdir = None
    stored = workdir / "config.json" if workdir is not None else None
    stored_kind = _run_kind(workdir) if stored is not None and stored.is_file() else None
    if known.resume and stored_kind is None:
        raise ValueError(f"--resume: {workdir} holds no run (no config.json)")
    if known.config is not None:
        kind = _config_kind(known.config, command)
        if stored_kind is not None and stored_kind != kind:
            raise ValueError(
                f"--config {known.config}: {_WHAT[kind]} configuration, but --workdir "
                f"{workdir} holds {_WHAT[stored_kind]} run; give another --workdir"
            )
    else:
        kind = stored_kind or command
    several = cluster is not None or "--distributed" in rest
    if workdir is None and several and not known.print_config:
        # Each process would name its own folder from its own clock.
        raise ValueError("--workdir: a run of several processes needs one, the same on "
                         "every process (a folder they all see)")
    if workdir is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        workdir = RUNS_DIR / ("dqn-" + stamp if kind == _DQN else stamp)
    if command == _DQN and kind == _ALPHAZERO:
        where = f"--workdir {workdir}" if known.config is None else f"--config {known.config}"
        raise ValueError(f"{where}: {_WHAT[kind]} {'run' if known.config is None else 'config'}"
                         f"; train it with {PROG[_ALPHAZERO]} {where}")
    if kind == _DQN and (cluster is not None or "--distributed" in rest):
        raise ValueError(
            "--distributed, --coordinator, --num-processes, --process-id: "
            f"{_WHAT[_DQN]} run trains in one process"
        )
    return _Plan(
        command=command, kind=kind, workdir=workdir,
        stored=stored if known.config is None and stored_kind is not None else None,
        config_name=known.config, rest=rest, cluster=cluster,
        no_progress=known.no_progress, print_config=known.print_config, picked=picked,
        force_workdir=known.force_workdir,
    )


def load(plan: _Plan) -> Invocation:
    """The second half of ``parse_train_args``: the defaults, then tyro over them.

    Without ``--config`` or a run's ``config.json``, AlphaZero's default preset is
    the one for the hardware found (a device query: after ``jax.distributed``).
    """
    from c4jax.run import runlog

    preset = None
    if plan.kind == _DQN:
        preset_dir, names = dqn_config.PRESET_DIR, dqn_config.preset_names()
        if plan.command == _ALPHAZERO:
            preset_dir, names = config_lib.PRESET_DIR, _value_based_presets()
        config_type, default = DQNConfig, "ddqn"
    else:
        preset_dir, names = config_lib.PRESET_DIR, config_lib.preset_names()
        config_type, default = Config, None
    if plan.stored is not None:
        base = config_lib.load(str(plan.stored), cls=config_type)
        source = f"the run directory's {plan.stored}"
    else:
        if plan.config_name is None and default is None:
            from c4jax.run import train_alphazero

            default = train_alphazero.default_preset()
        name = plan.config_name or default
        base = config_lib.load(name, cls=config_type, preset_dir=preset_dir)
        preset = name if name in names else None
        source = f"preset {name}" if preset else f"config file {name}"
    if plan.kind == _DQN:
        description = (
            "Train a value-based agent (Double DQN, Q-learning, the linear Grogu) for "
            f"Connect Four.\n\nDefaults below come from {source}. Presets (--config): "
            + ", ".join(names) + "."
        )
        wrapper = ValueBasedCommand
    else:
        description = (
            "Train AlphaZero for Connect Four.\n\n"
            f"Defaults below come from {source}. Presets (--config): "
            + ", ".join(config_lib.preset_names()) + "; value-based: "
            + ", ".join(_value_based_presets()) + "."
        )
        wrapper = AlphaZeroCommand
    parsed = tyro_cli(wrapper, default=wrapper(run=base), args=plan.rest,
                      description=description, prog=PROG[plan.command])
    config = parsed.run
    if plan.cluster is not None:
        config = dataclasses.replace(config, distributed=True)
    mode = "lines" if plan.no_progress else runlog.default_mode()
    return Invocation(config, plan.workdir, source, preset, mode, plan.print_config,
                      plan.cluster, plan.kind, plan.picked)


def parse_train_args(argv: list[str], command: str = _ALPHAZERO) -> Invocation:
    """Reads the run-level flags, the multi-process flags and per-field overrides.

    A run directory that already holds a ``config.json`` supplies the defaults
    (so resuming needs no flags); otherwise the preset does. Any of
    ``--coordinator``, ``--num-processes``, ``--process-id`` implies
    ``--distributed``; they belong to this process, not to the run, so they are
    not part of the ``Config`` (nor of ``config.json``).

    Raises:
        ValueError: one line (a flag, a config file, a run directory).
    """
    return load(resolve(argv, command))


def not_a_config(path: Path) -> str | None:
    """None when the file ``path`` reads as a c4jax run's configuration (a JSON object
    with a ``train`` section that loads as either kind), else why not (one line)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as err:
        return f"not JSON ({' '.join(str(err).split())})"
    if not isinstance(data, dict) or "train" not in data:
        return "no train section"
    kind = DQNConfig if data.get("algorithm") == dqn_config.ALGORITHM else Config
    try:
        config_lib.from_dict(data, kind)
    except ValueError as err:
        return " ".join(str(err).split())
    return None


def train_main(argv: list[str] | None, command: str) -> int:
    """The trainers' ``main``: parse, check, train, report; returns the exit code."""
    import jax

    from c4jax.run import compile_cache, distributed, rundir, xla_flags
    from c4jax.store import checkpoints

    argv = sys.argv[1:] if argv is None else list(argv)
    xla_flags.enable_fast_cpu()  # before the first device query
    compile_cache.enable()
    try:
        plan = resolve(argv, command)
        if not plan.force_workdir and not plan.print_config:
            rundir.check_ours(plan.workdir, not_a_config)
        early = plan.cluster is not None or "--distributed" in plan.rest
        if plan.kind == _ALPHAZERO and early and not plan.print_config:
            distributed.initialize(plan.cluster)  # must precede every device query below
        call = load(plan)
        if call.kind == _ALPHAZERO:
            if call.config.distributed and not call.print_config:
                if not jax.distributed.is_initialized():  # asked for by the run's config.json
                    distributed.initialize(call.cluster)
            config_lib.validate(call.config, num_devices=jax.device_count())
        else:
            dqn_config.validate(call.config)
        if call.print_config:
            print(json.dumps(config_lib.to_dict(call.config), indent=2))
            return 0
        rundir.prepare(call.workdir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a path this user may not read (a private folder above it)
        what = err.filename or "a file"
        print(f"error: cannot read {what} ({err.strerror or err}); give a path you can "
              "read and write", file=sys.stderr)
        return 2
    one_line_warnings()
    checkpoints.quiet_orbax_logs()
    return _train(call, PROG[command].split()[-1])


def _train(call: Invocation, name: str) -> int:
    import jax

    from c4jax.run import compile_cache, interrupt, rundir, train_alphazero, train_dqn, xla_flags
    from c4jax.store import checkpoints

    config, workdir = call.config, call.workdir
    # Process 0 speaks for a multi-process run; the others print only errors.
    say = print if jax.process_index() == 0 else (lambda *a, **k: None)
    if jax.process_index() != 0:  # process 0 reports a damaged checkpoint it moves aside
        warnings.simplefilter("ignore", checkpoints.DamagedCheckpointWarning)
    if call.picked:
        say(call.picked)
    if call.kind == _DQN:
        say(f"{name}: {call.source}, {config.train.num_iterations} iterations of "
            f"{config.train.num_envs} games x {config.train.env_steps} moves "
            f"({_KIND_NAME[_DQN]}); run directory {workdir}")
        train_and_evaluate = train_dqn.train_and_evaluate
    else:
        devices = f"{jax.device_count()} x {jax.devices()[0].platform}"
        if jax.process_count() > 1:
            devices += f" in {jax.process_count()} processes"
        budget = config.train.time_budget
        chosen = budget and rundir.saved_steps(workdir)  # a resumed run keeps its count
        count = (f"{config.train.num_iterations} iterations" if not budget else
                 f"{config.train.num_iterations} iterations (chosen by its {budget} time "
                 "budget)" if chosen else
                 f"as many iterations as fit in {budget} (at most "
                 f"{config.train.num_iterations}; --train.time-budget)")
        say(f"{name}: {call.source}, {count} on {devices}; "
            f"run directory {workdir} (configuration in {workdir / 'config.json'})")
        if not budget:
            say(train_alphazero.expected_time(config, call.preset, config.train.num_iterations))
        if jax.default_backend() == "cpu":
            say(xla_flags.describe())
        say(compile_cache.describe())
        train_and_evaluate = train_alphazero.train_and_evaluate
    try:
        with held_errors() as held:
            try:
                summary = train_and_evaluate(config, workdir, progress=call.progress)
            except Exception as err:
                if io_failure(err) is not None:
                    held.clear()  # what they say, the one line below says
                raise
    except Exception as err:
        several = jax.process_count() > 1
        failure = io_failure(err)
        if failure is not None:
            hint = f"{PROG[call.kind]} --workdir {shlex.quote(str(workdir))}"
            print(f"error: {io_message(failure, workdir, hint)}", file=sys.stderr)
            # A checkpoint still being written when another file failed fails on the same
            # disk; asyncio reports its task ("exception was never retrieved", a page of
            # traceback) when the process ends. The line above has said it.
            logging.getLogger("asyncio").disabled = True
            return leave(EXIT_IO) if several else EXIT_IO
        if not isinstance(err, (ValueError, train_alphazero.NonFiniteError,
                                jax.errors.JaxRuntimeError)):
            raise
        message, code = str(err), 2 if isinstance(err, ValueError) else 1
        if several and peer_failure(err):
            first = (message.strip().splitlines() or [""])[0]
            message, code = (
                f"process {jax.process_index()} of {jax.process_count()} lost contact with "
                f"the others ({first}); another process has probably stopped: see its "
                f"output. Continue from the last checkpoint in {workdir} by starting every "
                "process again with the same command."
            ), 1
        elif out_of_memory(err):
            first = (message.strip().splitlines() or [""])[0]
            games = "--train.num-envs" if call.kind == _DQN else "--train.selfplay-batch"
            message = (f"the device ran out of memory ({first[:300]}); fewer games at once "
                       f"({games}) or a smaller --train.minibatch-size need less")
        elif isinstance(err, jax.errors.JaxRuntimeError):
            raise
        print(f"error: {message}", file=sys.stderr)
        return leave(code) if several else code
    if summary["interrupted"]:
        return summary.get("exit_code", interrupt.EXIT_CODE)
    if summary["done"]:
        final = ", ".join(f"{k} {v:.3f}" for k, v in summary["eval"].items())
        say(f"finished iteration {summary['step']}; last evaluation: {final or 'none'}")
    if call.kind == _DQN:
        say(f"outputs in {workdir}; play it: python -m c4jax.play {workdir}; "
            f"rate it: python -m c4jax.evaluate match dqn:{workdir} lookahead --games 400")
    else:
        say(f"outputs in {workdir}; view with: {tensorboard_command(workdir)}")
    return 0


@contextlib.contextmanager
def held_errors(logger: str = "absl"):
    """Holds back the ERROR records of ``logger`` while the block runs, and logs them
    when it ends, unless the block empties the list it is given.

    Orbax logs every failed background save as an ERROR with a page of traceback,
    then raises the error again in the caller: on a full disk that was some ninety
    lines before the one that says what to do. The trainers' command line drops
    them when it reports the failure in one line itself, and shows them otherwise.
    """
    held: list[logging.LogRecord] = []
    target = logging.getLogger(logger)

    def hold(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            held.append(record)
            return False
        return True

    target.addFilter(hold)
    try:
        yield held
    finally:
        target.removeFilter(hold)
        for record in held:
            target.handle(record)


def io_failure(err: BaseException) -> OSError | None:
    """The OSError of a file that could not be written (``_IO_ERRNOS``) that ``err`` is or
    was raised from (its ``__cause__`` and ``__context__``, as Orbax re-raises), or None."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _IO_ERRNOS:
            return err
        err = err.__cause__ or err.__context__
    return None


def io_message(err: OSError, workdir: Path, hint: str) -> str:
    """One line: which file could not be written and why, the newest checkpoint saved in
    ``workdir`` (or none), and how to go on (``hint``: the command that continues)."""
    from c4jax.run import rundir

    reason = err.strerror or errno.errorcode.get(err.errno or 0, "I/O error")
    what = f"cannot write {err.filename}" if err.filename else f"cannot write in {workdir}"
    saving = _saving(err.filename, workdir)
    if saving is not None:
        what = f"cannot save checkpoint {saving} in {Path(workdir) / 'checkpoints'}"
    steps = rundir.saved_steps(workdir)
    saved = (f"checkpoint {steps[-1]} is the newest saved" if steps
             else "no checkpoint was saved")
    if err.errno in _NO_ROOM:
        fix = "free some space there (or raise the quota)"
    elif err.errno == errno.EIO:
        fix = "check the disk"
    else:
        fix = "make it writable"
    return f"{what} ({reason}); {saved}. {fix.capitalize()}, then continue with: {hint}"


def _saving(filename, workdir: Path) -> int | None:
    """The step of the checkpoint whose (temporary) folder holds ``filename``, if one does."""
    if not filename:
        return None
    try:
        parts = Path(filename).relative_to(Path(workdir).absolute() / "checkpoints").parts
    except ValueError:
        try:
            parts = Path(filename).relative_to(Path(workdir) / "checkpoints").parts
        except ValueError:
            return None
    found = re.match(r"([0-9]+)(\.orbax-checkpoint-tmp.*)?$", parts[0]) if parts else None
    return int(found.group(1)) if found else None


_STATUS = re.compile(r"^[A-Z_]+: ")  # how XLA's errors begin: "UNKNOWN: Gloo AllGather failed"
# Statuses of a failure of this process's own device, not of contact with the others.
_LOCAL_STATUS = re.compile(r"^(RESOURCE_EXHAUSTED|INVALID_ARGUMENT|UNIMPLEMENTED): ")


def peer_failure(err: Exception) -> bool:
    """Whether ``err`` is a runtime failure (a collective with a dead process),
    not one of c4jax's own errors nor this device's own (out of memory). Such a
    failure reaches Python as a ``JaxRuntimeError``, or as a ValueError when
    NumPy reads the failed array."""
    import jax

    text = str(err)
    if _LOCAL_STATUS.match(text):
        return False
    return isinstance(err, jax.errors.JaxRuntimeError) or bool(_STATUS.match(text))


def out_of_memory(err: Exception) -> bool:
    """Whether ``err`` is the device running out of memory (XLA's RESOURCE_EXHAUSTED)."""
    return str(err).startswith("RESOURCE_EXHAUSTED: ")


def leave(code: int, wait: float = 10.0, exit: Callable[[int], None] = os._exit) -> int:
    """Ends this process of a multi-process run with ``code``, not waiting for a dead one.

    JAX's exit handler waits at a shutdown barrier for every process: when all
    stop on the same error they meet there at once, but when one has died it
    would wait until the heartbeat timeout (100 s) and then abort with a page
    of logs. So the barrier gets ``wait`` seconds in a thread, then
    ``os._exit``.
    """
    import jax

    sys.stdout.flush()
    sys.stderr.flush()
    shutdown = threading.Thread(target=jax.distributed.shutdown, daemon=True)
    shutdown.start()
    shutdown.join(wait)
    exit(code)
    return code


def tensorboard_command(workdir: Path) -> str:
    command = f"tensorboard --logdir {workdir / 'tb'}"
    if importlib.util.find_spec("tensorboard") is None:
        command += " (first: pip install 'c4jax[tensorboard]')"
    return command
