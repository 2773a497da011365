"""Agent specs: the one list of the agents that can be named, and ``make_agent``.

Every command line, the solver table, the periodic evaluation and the tests
name agents by a spec string and turn it into an agent here:

    name, agent = make_agent("minimax-5")   # agent: act(key, state[B]) -> [B]

The forms (``ENTRIES``, in the order they are tried):

* ``random``: uniformly random legal moves.
* ``win-if-you-can``: win in one, else random (never blocks).
* ``lookahead``: win in one, else block, else random.
* ``mcts`` or ``mcts-N``: pure MCTS with random rollouts, N simulations (1000;
  at most ``inputs.MAX_SIMULATIONS``).
* ``minimax`` or ``minimax-K``: depth-K negamax with a heuristic (depth 5).
* ``perfect``: the exact solver (bitbully, the optional extra ``[solver]``).
* ``pretrained`` or ``pretrained@SIMS``: the network shipped in the package
  (``c4jax/pretrained``) with SIMS simulations (default: its evaluation setting).
* ``dqn:RUN_DIR[:STEP]``: a value-based run's Q-network (``python -m
  c4jax.dqn.train``: Double DQN, Q-learning, Grogu), greedy, no search. A bare
  ``RUN_DIR`` of a value-based run means the same.
* ``RUN_DIR[:STEP][@SIMS]``: a training run's network with SIMS search
  simulations per move (default: the run's evaluation setting; ``@0`` = the
  network alone). Only the network variables are read
  (``checkpoints.restore_variables``). A directory written by ``python -m
  c4jax.export network`` (``variables.msgpack``, ``config.json``) works the
  same way, ``DIR[@SIMS]``, without ``:STEP``.

STEP picks a run's checkpoint: a training iteration, ``last`` (the newest
checkpoint) or ``best`` (the best by evaluation score, which is also what no
STEP means). Evaluation scores can differ by little between checkpoints, so a
spec without STEP should say which one it chose: ``checkpoint_note`` is that
line, and ``make_agent(spec, tell=print)`` prints it.

Every number in a spec (N, K, SIMS, STEP) is ASCII digits within stated bounds
(``c4jax.inputs``): N and SIMS at most ``inputs.MAX_SIMULATIONS``, STEP at most
``MAX_STEP``; a spec longer than ``MAX_SPEC_LENGTH`` characters is refused
before anything else. A bad spec is one ``ValueError`` line that repeats the
spec (cut when long), says what is wrong and lists the forms.

To add an agent: write its constructor (a jittable agent, as in
``c4jax.baselines``, ``uct`` or ``minimax``, or a ``protocol.HostAgent`` for
one that runs on the host, such as the C++ solver in ``perfect``),
add one ``Entry`` to ``ENTRIES`` before the run-directory catch-all, and test
it in ``tests/judge/test_registry.py``. Its ``form`` joins the error messages
and its ``description`` the ``--help`` of the command lines.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from c4jax import baselines, inputs
from c4jax.alphazero import network, search
from c4jax.judge import minimax, perfect, uct
from c4jax.judge.protocol import Agent
from c4jax.store import checkpoints, exported

LAST, BEST = "last", "best"  # the named checkpoints of a run spec: RUN:last, RUN:best
DEFAULT_MCTS_SIMULATIONS = 1000
DEFAULT_MINIMAX_DEPTH = 5
MAX_MINIMAX_DEPTH = 8  # 7^8 = 5.8M leaves per game and move: already very slow
MAX_STEP = inputs.MAX_STEP  # the largest checkpoint step a spec may name
MAX_SPEC_LENGTH = 4096  # characters: Linux's PATH_MAX, the longest run directory

_RUN_SPEC = re.compile(r"(?P<path>.+?)(?::(?P<step>[^:@]*))?(?:@(?P<sims>[^@]*))?", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec (before anything is loaded).

    ``kind`` names the registry entry (``random``, ``lookahead``, ``mcts``,
    ``minimax``, ``run``); ``value`` is the simulations (mcts) or depth
    (minimax); ``run_dir``, ``step`` and ``sims`` describe a run (step
    ``None`` = the best checkpoint, ``"last"`` = the newest; sims ``None`` =
    the run's setting).
    """

    kind: str
    value: int | None = None
    run_dir: Path | None = None
    step: int | str | None = None
    sims: int | None = None


class NamedAgent(NamedTuple):
    """An agent and its normalised name (``mcts`` -> ``mcts-1000``)."""

    name: str
    agent: Agent


@dataclasses.dataclass(frozen=True)
class Entry:
    """One form of agent spec: how to recognise it and how to build the agent."""

    kind: str  # the AgentSpec.kind it parses to
    form: str  # the spec forms, as error messages list them
    description: str  # one line for --help
    parse: Callable[[str], AgentSpec | None]  # the spec's fields; None if not this form
    build: Callable[[AgentSpec], NamedAgent]


# --- Parsing helpers. ---


def _forms() -> str:
    forms = [entry.form for entry in ENTRIES]
    return ", ".join(forms[:-1]) + ", or " + forms[-1]


def _bad_spec(spec: str, why: str) -> ValueError:
    return ValueError(f"bad agent spec {inputs.shown(spec)}: {why}. Allowed: {AGENT_FORMS}")


def _is_dir(path: str) -> bool:
    """Whether ``path`` names a directory: False for ``''`` (not the current one) and
    for a name the system cannot look up (too long, a NUL byte) rather than an OSError.
    A reference agent's name steps aside only for a directory (a run named like it),
    never for a file of that name."""
    if not path:
        return False
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def _parse_int(spec: str, text: str, what: str, low: int, high: int) -> int:
    """``text`` as a whole number ``low..high`` (ASCII digits only, ``c4jax.inputs``)."""
    try:
        return inputs.parse_count(text or "", name=what, low=low, high=high)
    except inputs.InputError:
        if not text or not set(text) <= set("0123456789"):
            raise _bad_spec(
                spec, f"{what} {inputs.shown(text or '')} is not a whole number"
            ) from None
        raise _bad_spec(
            spec, f"{what} {_number(text)} is out of range ({inputs.allowed(low, high)})"
        ) from None


def _number(digits: str) -> str:
    """A string of ASCII digits as a message shows it: cut when long."""
    digits = digits.lstrip("0") or "0"
    return digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits)} digits)"


def _parse_step(spec: str, text: str) -> int | str | None:
    """A run spec's STEP: a whole number ``0..MAX_STEP``, ``last``, or ``best`` (None,
    the default)."""
    if text == LAST:
        return LAST
    if text == BEST:
        return None
    if not text or not set(text) <= set("0123456789"):
        raise _bad_spec(
            spec, f"checkpoint step {inputs.shown(text)} is not a whole number, last or best"
        )
    return _parse_int(spec, text, "checkpoint step", 0, MAX_STEP)


def short_error(err: Exception, limit: int = 600) -> str:
    """The message of ``err`` on one line, cut to ``limit`` characters (Orbax's can be
    pages long)."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + " ..."


# --- The entries: parse and build. ---


def _parse_word(word: str) -> Callable[[str], AgentSpec | None]:
    return lambda spec: AgentSpec(kind=word) if spec == word else None


def _parse_mcts(spec: str) -> AgentSpec | None:
    kind, dash, arg = spec.partition("-")
    if kind != "mcts" or _is_dir(spec):
        return None
    sims = (
        DEFAULT_MCTS_SIMULATIONS if not dash
        else _parse_int(spec, arg, "simulations", 1, inputs.MAX_SIMULATIONS)
    )
    return AgentSpec(kind="mcts", value=sims)


def _parse_minimax(spec: str) -> AgentSpec | None:
    kind, dash, arg = spec.partition("-")
    if kind != "minimax" or _is_dir(spec):
        return None
    depth = (
        DEFAULT_MINIMAX_DEPTH if not dash else _parse_int(spec, arg, "depth", 1, MAX_MINIMAX_DEPTH)
    )
    return AgentSpec(kind="minimax", value=depth)


def _parse_run(spec: str) -> AgentSpec:
    """The catch-all: a run directory, else the error that lists every form."""
    if _is_dir(spec):  # a directory whose name happens to contain ':' or '@'
        return AgentSpec(kind="run", run_dir=Path(spec))
    match = _RUN_SPEC.fullmatch(spec)
    path, step, sims = match.group("path"), match.group("step"), match.group("sims")
    if not _is_dir(path):
        if step is None and sims is None:
            raise _bad_spec(
                spec, f"not a reference agent, and no run directory {inputs.shown(path)}"
            )
        raise _bad_spec(spec, f"no run directory {inputs.shown(path)}")
    return AgentSpec(
        kind="run",
        run_dir=Path(path),
        step=None if step is None else _parse_step(spec, step),
        sims=None if sims is None else _sims(spec, sims),
    )


def _sims(spec: str, text: str) -> int:
    """A spec's ``@SIMS``: search simulations ``0..inputs.MAX_SIMULATIONS``."""
    return _parse_int(spec, text, "simulations", 0, inputs.MAX_SIMULATIONS)


def _parse_pretrained(spec: str) -> AgentSpec | None:
    word, at, sims = spec.partition("@")
    if word != "pretrained" or _is_dir(spec):
        return None
    sims_value = _sims(spec, sims) if at else None
    return AgentSpec(kind="pretrained", sims=sims_value)


def _parse_dqn(spec: str) -> AgentSpec | None:
    prefix, colon, rest = spec.partition(":")
    if prefix != "dqn" or not colon or _is_dir(spec):
        return None
    path, colon, step = rest.rpartition(":") if ":" in rest else (rest, "", "")
    if not _is_dir(path):
        raise _bad_spec(spec, f"no run directory {inputs.shown(path)}")
    return AgentSpec(
        kind="dqn", run_dir=Path(path),
        step=_parse_step(spec, step) if colon else None,
    )


def _build_dqn(spec: AgentSpec) -> NamedAgent:
    from c4jax.dqn import player as dqn_player  # the value-based package, on demand

    return NamedAgent(*dqn_player.make_q_agent(spec.run_dir, resolve_step(spec.run_dir, spec.step)))


def _build_run(spec: AgentSpec) -> NamedAgent:
    from c4jax.dqn.config import is_dqn_run

    if is_dqn_run(spec.run_dir):
        if spec.sims is not None:
            raise ValueError(
                f"{spec.run_dir} is a value-based run, which does not search: drop @SIMS"
            )
        return _build_dqn(spec)
    if exported.is_exported(spec.run_dir):
        if spec.step is not None:
            raise ValueError(
                f"{spec.run_dir} is an exported network, which holds one step: drop :STEP"
            )
        return make_exported_agent(spec.run_dir, sims=spec.sims)
    return make_run_agent(spec.run_dir, step=spec.step, sims=spec.sims)


ENTRIES: tuple[Entry, ...] = (
    Entry(
        kind="random",
        form="random",
        description="uniformly random legal moves",
        parse=_parse_word("random"),
        build=lambda s: NamedAgent("random", baselines.random_agent),
    ),
    Entry(
        kind="win-if-you-can",
        form="win-if-you-can",
        description="win in one if possible, else random (never blocks)",
        parse=_parse_word("win-if-you-can"),
        build=lambda s: NamedAgent("win-if-you-can", baselines.win_agent),
    ),
    Entry(
        kind="lookahead",
        form="lookahead",
        description="win in one, else block the opponent's win in one, else random",
        parse=_parse_word("lookahead"),
        build=lambda s: NamedAgent("lookahead", baselines.lookahead_agent),
    ),
    Entry(
        kind="mcts",
        form=(
            f"mcts, mcts-N (N simulations 1..{inputs.MAX_SIMULATIONS},"
            f" default {DEFAULT_MCTS_SIMULATIONS})"
        ),
        description="pure MCTS (UCT) with random rollouts, N simulations per move",
        parse=_parse_mcts,
        build=lambda s: NamedAgent(f"mcts-{s.value}", uct.make_mcts_agent(s.value)),
    ),
    Entry(
        kind="minimax",
        form=(
            f"minimax, minimax-K (depth 1..{MAX_MINIMAX_DEPTH}, "
            f"default {DEFAULT_MINIMAX_DEPTH})"
        ),
        description="depth-K negamax with a window-counting heuristic",
        parse=_parse_minimax,
        build=lambda s: NamedAgent(f"minimax-{s.value}", minimax.make_minimax_agent(s.value)),
    ),
    Entry(
        kind="perfect",
        form="perfect",
        description="the exact solver (bitbully; pip install 'c4jax[solver]'): a best move,"
        " random among equals",
        parse=_parse_word("perfect"),
        build=lambda s: NamedAgent("perfect", perfect.make_perfect_agent()),
    ),
    Entry(
        kind="pretrained",
        form="pretrained, pretrained@SIMS",
        description="the network shipped in the package with SIMS simulations"
        " (default: its evaluation setting; @0 = the network alone)",
        parse=_parse_pretrained,
        build=lambda s: make_pretrained_agent(sims=s.sims),
    ),
    Entry(
        kind="dqn",
        form="dqn:RUN_DIR[:STEP]",
        description="a value-based run's Q-network (python -m c4jax.dqn.train), greedy;"
        " STEP as for a run directory",
        parse=_parse_dqn,
        build=_build_dqn,
    ),
    # The catch-all comes last: anything else must be a run directory.
    Entry(
        kind="run",
        form="a run directory RUN_DIR[:STEP][@SIMS] (e.g. runs/X, runs/X:last@64, runs/X:40@0)",
        description="a training run's network with SIMS simulations (default: the run's"
        " evaluation setting; @0 = the network alone); STEP: an iteration, last (the newest"
        " checkpoint) or best (the best by evaluation score: the default, its iteration"
        " printed). Also a directory written by python -m c4jax.export network, DIR[@SIMS]",
        parse=_parse_run,
        build=_build_run,
    ),
)

AGENT_FORMS = _forms()  # every form, for error messages and --help


def describe() -> str:
    """Each spec form on a line, its description indented below it (for --help texts)."""
    return "\n".join(f"  {entry.form}\n      {entry.description}" for entry in ENTRIES)


# --- The public entrance. ---


def parse_spec(spec: str | os.PathLike) -> AgentSpec:
    """Parses an agent spec without loading anything (see the module docstring).

    Raises:
        ValueError: one line naming the spec (cut when long), what is wrong and the
            allowed forms.
    """
    if isinstance(spec, os.PathLike):  # a run's or an exported network's folder
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise ValueError(f"an agent spec is a string (or a path), got {type(spec).__name__}"
                         f" {spec!r:.80}")
    if not spec.strip():
        raise _bad_spec(spec, "empty")
    if len(spec) > MAX_SPEC_LENGTH:
        raise _bad_spec(spec, f"longer than {MAX_SPEC_LENGTH} characters")
    spec = spec.strip()
    for entry in ENTRIES:
        parsed = entry.parse(spec)
        if parsed is not None:
            return parsed
    raise _bad_spec(spec, "no form matches")  # unreachable: the last entry takes the rest


def make_agent(spec: str | os.PathLike, *,
               tell: Callable[[str], None] | None = None) -> NamedAgent:
    """``(name, agent)`` for an agent spec; the agent is ``act(key, state[B]) -> [B]``.

    Names are normalised: ``mcts`` -> ``mcts-1000``, ``runs/X`` ->
    ``runs/X:STEP@SIMS`` with the checkpoint step and simulations used.

    Args:
        spec: the agent spec (see the module).
        tell: called with ``checkpoint_note``'s line when a run spec without
            STEP (or with ``:best``) chose its checkpoint by evaluation score
            (``print`` for a command line); None says nothing.

    Raises:
        ValueError: naming the spec, what is wrong and the allowed forms (also
            when a run directory holds no usable checkpoint).
    """
    parsed = parse_spec(spec)
    spec = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    entry = next(e for e in ENTRIES if e.kind == parsed.kind)
    try:
        named = entry.build(parsed)
    except ValueError as err:
        raise ValueError(f"agent spec {inputs.shown(spec)}: {short_error(err)}") from None
    if (
        tell is not None
        and parsed.kind in ("run", "dqn")
        and parsed.step is None
        and not exported.is_exported(parsed.run_dir)  # one network, nothing to choose
    ):
        step = _step_in_name(named.name)
        tell(checkpoint_note(parsed.run_dir, step, newest=_last_spec(parsed)))
    return named


def _step_in_name(name: str) -> int:
    """The checkpoint step in a run agent's name: ``RUN:STEP@SIMS`` or ``dqn:RUN:STEP``,
    read from the end (the directory's name may hold ``:`` or ``@``)."""
    return int(re.search(r":(\d+)(?:@\d+)?$", name).group(1))


def _last_spec(parsed: AgentSpec) -> str:
    """The spec of the run's newest checkpoint (without @SIMS: one line per run)."""
    prefix = "dqn:" if parsed.kind == "dqn" else ""
    return f"{prefix}{parsed.run_dir}:{LAST}"


def make_agents(
    specs: Sequence[str], *, tell: Callable[[str], None] | None = None
) -> list[NamedAgent]:
    """``make_agent`` of each spec; raises ValueError on a bad one or a repeated name.

    ``tell`` as for ``make_agent``, each line once (``runs/X@0 runs/X@64`` tell one).
    """
    out: list[NamedAgent] = []
    seen: dict[str, str] = {}
    told: set[str] = set()

    def tell_once(line: str) -> None:
        if tell is not None and line not in told:
            told.add(line)
            tell(line)

    for spec in specs:
        named = make_agent(spec, tell=tell_once)
        if named.name in seen:
            raise ValueError(
                f"agent {named.name!r} is listed twice"
                f" ({inputs.shown(seen[named.name])} and {inputs.shown(spec)})"
            )
        seen[named.name] = spec
        out.append(named)
    return out


def make_run_agent(
    run_dir: str | Path,
    *,
    step: int | str | None = None,
    sims: int | None = None,
    tell: Callable[[str], None] | None = None,
) -> NamedAgent:
    """The network of a run's checkpoint with ``sims`` simulations.

    ``step``: a training iteration, ``"last"`` (the newest checkpoint), or
    None or ``"best"`` (the best by evaluation score). The name is
    ``RUN_DIR:STEP@SIMS``. Cached: the same arguments give the same agent
    object, so compiled matches and solver calls are reused, and several
    agents of one run (``runs/X@0``, ``runs/X@64``) read its checkpoint once;
    once the run's checkpoints change (it trained on), it is read again.
    ``tell`` as for ``make_agent`` (the newest is then ``RUN_DIR:last``).

    Raises:
        ValueError: not a run directory, no checkpoint, or no such step.
    """
    named = _run_agent(str(run_dir), resolve_step(run_dir, step), sims,
                       _checkpoints_stamp(run_dir))
    if tell is not None and step in (None, BEST):
        tell(checkpoint_note(run_dir, _step_in_name(named.name), newest=f"{run_dir}:{LAST}"))
    return named


def _scores(run_dir: str | Path) -> dict[int, float | None]:
    """Every kept checkpoint step of a run and its evaluation score (None if unscored)."""
    run_dir = Path(run_dir)
    if not (run_dir / "checkpoints").is_dir():
        raise ValueError(f"{run_dir}: not a run directory (no checkpoints/ inside)")
    manager = checkpoints.open_for_reading(run_dir)
    try:
        return {
            int(step): (manager.metrics(step) or {}).get(checkpoints.SCORE)
            for step in manager.all_steps()
        }
    finally:
        manager.close()


def newest_step(run_dir: str | Path) -> int:
    """The step of a run's newest checkpoint (what ``RUN:last`` plays).

    Raises:
        ValueError: not a run directory, or no checkpoint saved yet.
    """
    steps = _scores(run_dir)
    if not steps:
        raise ValueError(f"{run_dir}: no checkpoint saved yet")
    return max(steps)


def resolve_step(run_dir: str | Path, step: int | str | None) -> int | None:
    """A checkpoint choice as the loaders take it: ``"last"`` -> the newest step,
    ``"best"`` -> None (their default, the best by evaluation score), a step as is.

    Raises:
        ValueError: ``"last"`` of a directory with no checkpoint.
    """
    if step == LAST:
        return newest_step(run_dir)
    return None if step == BEST else step


def checkpoint_note(run_dir: str | Path, step: int, *, newest: str) -> str:
    """One line naming the checkpoint a run spec without STEP chose, and why.

    Args:
        run_dir: the run.
        step: the checkpoint that was loaded.
        newest: how to ask for the newest checkpoint instead (``runs/X:last``,
            ``--step last``).

    E.g. ``runs/X: the best checkpoint by evaluation score, iteration 210
    (score 0.8127); the newest is iteration 280 (score 0.8120): runs/X:last
    plays it``.
    """
    try:
        scores = _scores(run_dir)
    except Exception:  # the checkpoint is loaded already: the note is not worth a failure
        scores = {}
    if step not in scores:
        return f"{run_dir}: checkpoint {step}"
    last = max(scores)
    scored = {s: v for s, v in scores.items() if v is not None}

    def score(s: int) -> str:
        return "no evaluation score" if scored.get(s) is None else f"score {scored[s]:.4f}"

    if not scored:
        return f"{run_dir}: the newest checkpoint, iteration {step} (none has an evaluation score)"
    if step not in scored:  # every scored checkpoint was damaged
        return (
            f"{run_dir}: iteration {step}, the newest checkpoint without an evaluation score"
            " (those with one could not be read)"
        )
    ranked = sorted(scored, key=lambda s: (scored[s], s), reverse=True)
    why = (
        "the best checkpoint by evaluation score"
        if step == ranked[0]
        else "the best readable checkpoint by evaluation score"  # past damaged ones
    )
    if step == last:
        return f"{run_dir}: {why}, iteration {step} ({score(step)}), which is also the newest"
    return (
        f"{run_dir}: {why}, iteration {step} ({score(step)}); the newest is iteration"
        f" {last} ({score(last)}): {newest} plays it"
    )


def _checkpoints_stamp(run_dir: str | Path) -> tuple:
    """What a cached load depends on besides its arguments: the run's absolute path
    (a relative one names another run after ``os.chdir``) and its checkpoints'
    names and times, so that a run trained on since (its best checkpoint may be
    another), or made again under the same name, is read again."""
    folder = Path(run_dir).absolute() / "checkpoints"
    try:
        entries = tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()))
    except OSError:
        entries = ()
    return str(folder), entries


@functools.lru_cache(maxsize=8)
def _restore(run_dir: str, step: int | None, stamp: tuple) -> checkpoints.NetworkCheckpoint:
    del stamp  # part of the cache's key only
    return checkpoints.restore_variables(run_dir, step)


@functools.lru_cache(maxsize=16)
def _run_agent(run_dir: str, step: int | None, sims: int | None, stamp: tuple) -> NamedAgent:
    restored = _restore(run_dir, step, stamp)
    return _network_agent(f"{run_dir}:{restored.step}", restored, sims)


def make_exported_agent(directory: str | Path, *, sims: int | None = None) -> NamedAgent:
    """A network written by ``python -m c4jax.export network`` with ``sims`` simulations,
    named ``DIR@SIMS``.

    Raises:
        ValueError: the directory's files are missing or damaged.
    """
    return _exported_agent(str(directory), sims)


@functools.lru_cache(maxsize=8)
def _exported_agent(directory: str, sims: int | None) -> NamedAgent:
    return _network_agent(directory, exported.load_exported(directory), sims)


def make_pretrained_agent(*, sims: int | None = None) -> NamedAgent:
    """The network shipped in the package with ``sims`` simulations, named ``pretrained@SIMS``.

    Raises:
        ValueError: the package's pretrained files are missing or damaged.
    """
    return _pretrained_agent(sims)


@functools.lru_cache(maxsize=8)
def _pretrained_agent(sims: int | None) -> NamedAgent:
    return _network_agent("pretrained", exported.load_exported(), sims)


def _network_agent(
    prefix: str, restored: checkpoints.NetworkCheckpoint, sims: int | None
) -> NamedAgent:
    """``PREFIX@SIMS``: a restored network and its search (``sims`` None = its eval setting)."""
    config = restored.config
    sims = config.eval.num_simulations if sims is None else sims
    apply_fn = network.make_apply_fn(network.make_network(config.network))
    act = search.make_alphazero_act(apply_fn, config.search, num_simulations=sims)
    return NamedAgent(f"{prefix}@{sims}", functools.partial(act, restored.variables))
