"""Every command a user can copy from the documentation parses with today's parsers.

Sources: README.md and docs/**/*.md, their fenced code blocks marked bash, sh,
shell or console (``$ `` lines only), and unmarked blocks whose lines start with
such a command. Backslash-continued lines are joined, comment lines and trailing
``# ...`` comments dropped, and each line is split at the shell operators (``|``,
``>``, ``&&``, ``;``, ``&``, ...); a command is ``python -m c4jax.MODULE ...``,
``python -m bench.MODULE ...``, ``python -m c4jax COMMAND ...`` or the console
script ``c4jax COMMAND ...`` (``c4jax/__main__.py`` COMMANDS names the module).
Before it may stand ``VAR=value`` assignments, a ``$ `` prompt and the wrappers
``nohup``, ``time``, ``env``, ``taskset -c N``, ``srun --opts...`` (a command found
behind anything else in a shell block fails the test: extend ``_wrapper_length``).
A quoted argument holding a command (``gcloud ... --command="cd c4jax && python
-m c4jax.train ..."``) is searched too.

Placeholders: ``<name>`` becomes ``name``, the brackets of an optional
``[--flag value ...]`` are dropped (its flags are parsed), ``...`` is skipped, and
the single-token value placeholders of ``_VALUES`` (``S``, ``N``, ...) become
numbers; path placeholders (RUN_DIR, runs/X, OUT, W, PREFIX) stay as they are.
Every command is parsed with the working directory set to one temporary folder,
so output paths that the parsers check at parse time (``bench.outfile.path_arg``,
``evaluate --json/--plot``) point there; it holds ``configs`` (a link to the
repository's, for ``--config configs/cpu.json``) and ``runs/`` with one small
AlphaZero and one value-based run, for ``--resume``.

How each command is parsed, with nothing run:

* ``c4jax.train``, ``c4jax.dqn.train``: their ``parse_args(argv)`` (the same
  ``train_command`` code as ``main``, which stops before any training) and the
  configuration's ``validate``, as ``--print-config`` does. ``bench.time_to_strength``
  also parses the training command line it would launch (its arguments after ``--``).
* ``c4jax.evaluate``: ``build_parser().parse_args`` and ``check_outputs`` (what
  ``main`` checks before any work).
* A module with its own ``parse_args(argv)`` (most benchmarks): that function,
  with the checks it adds after argparse.
* Any other module builds its parser inside ``main()``: ``argparse.ArgumentParser.
  parse_args`` is monkeypatched to parse as usual and then raise a sentinel
  exception (a ``BaseException``, so no ``except Exception`` in ``main`` swallows
  it), which ends ``main`` right after its command line is read and before any
  work; a parse error is re-raised wrapped in another sentinel (``main`` would
  turn ``cli.UsageError`` into a return code). What ``main`` does before parsing
  (``xla_flags.enable_fast_cpu``, ``compile_cache.enable``) is made a no-op.

``--help`` passes when the parser exits with status 0. A failure names the file,
the line, the command and the parser's error. Commands the docs show failing on
purpose would go into ``ALLOWED_FAILURES`` with the reason (none today).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGS = {"bash", "sh", "shell", "console", "shell-session", "zsh"}

# "file:line" -> why the documented command is meant to fail. Empty: none does.
ALLOWED_FAILURES: dict[str, str] = {}

# Single-token value placeholders of the docs and a value of the type they stand for.
_VALUES = {
    "S": "0",  # --seed S
    "N": "2",  # a device count (XLA_FLAGS=...=N, stripped with the assignment)
    "B": "256",  # bench.bench_train [--batch B ...]
    "T": "16",  # bench.bench_train [--steps T ...]
    "$i": "0",  # --process-id $i in a shell loop
}

_OPERATORS = re.compile(r"^[;&|<>()]+$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MODULE = re.compile(r"^(c4jax|bench)(\.[A-Za-z_][\w.]*)?$")
_EMBEDDED = re.compile(r"python3? -m (c4jax|bench)\b|(^|[;&|]\s*)c4jax\s")
# An unmarked block's line counts only when it starts with a command.
_LINE_COMMAND = re.compile(
    r"^(\$ )?([A-Za-z_]\w*=\S+ +)*((nohup|time|env) +|taskset +-c +\S+ +)*"
    r"(python3? -m (c4jax|bench)\b|c4jax( |$))"
)


@dataclass(frozen=True)
class DocCommand:
    where: str  # "docs/training.md:123" (the first line of a continued command)
    text: str  # the command as the docs show it (continuations joined)
    module: str | None  # "c4jax.train", "bench.judge_run"; None: the c4jax dispatcher
    argv: tuple[str, ...]  # the arguments, placeholders substituted
    problem: str | None = None  # an extraction failure to report instead of parsing


def _blocks(path: Path):
    """(language, [(line number, text)]) of each fenced code block of ``path``."""
    fence, lang, lines = None, "", []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if fence is None:
            match = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if match:
                fence, lang, lines = match.group(1), match.group(2).lower(), []
        elif stripped.startswith(fence) and not stripped[len(fence):].strip():
            yield lang, lines
            fence = None
        else:
            lines.append((number, line))


def _logical_lines(lines):
    """Backslash continuations joined: (first line number, text)."""
    start, parts = None, []
    for number, line in lines:
        if start is None:
            start = number
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        parts.append(line)
        yield start, " ".join(p.strip() for p in parts)
        start, parts = None, []
    if parts:
        yield start, " ".join(p.strip() for p in parts)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _segments(tokens: list[str]) -> list[list[str]]:
    """The simple commands between shell operators."""
    out, current = [], []
    for token in tokens:
        if _OPERATORS.match(token):
            if token[0] in "<>" and current and current[-1].isdigit():
                current.pop()  # the 2 of 2>&1
            out.append(current)
            current = []
        else:
            current.append(token)
    out.append(current)
    return [s for s in out if s]


def _wrapper_length(tokens: list[str], i: int) -> int:
    """How many tokens from ``i`` are a prefix a command may follow (0: none)."""
    token = tokens[i]
    if token in ("$", "nohup", "time", "env", "do", "then", "else"):
        return 1
    if _ASSIGNMENT.match(token):
        return 1
    if token == "taskset" and i + 2 < len(tokens) and tokens[i + 1] == "-c":
        return 3
    if token == "srun":
        n = 1
        while i + n < len(tokens) and tokens[i + n].startswith("-"):
            n += 1
        return n
    return 0


def _command_start(tokens: list[str], i: int) -> tuple[str | None, int] | None:
    """(module or None for the dispatcher, index of its first argument) if a
    command of ours starts at ``tokens[i]``."""
    token = tokens[i]
    if token in ("python", "python3") and i + 2 < len(tokens) and tokens[i + 1] == "-m":
        name = tokens[i + 2]
        if not _MODULE.match(name):
            return None
        if name == "c4jax":  # python -m c4jax COMMAND ...
            return None, i + 3
        return name, i + 3
    if token == "c4jax":
        return None, i + 1
    return None


def _clean(args: list[str]) -> tuple[str, ...]:
    out = []
    for arg in args:
        if arg.startswith("[") and arg != "[":
            arg = arg[1:]
        if arg.endswith("]") and "[" not in arg:
            arg = arg[:-1]
        if arg in ("...", "…", "[", "]"):
            continue
        out.append(_VALUES.get(arg, arg))
    return tuple(out)


def _commands_in(text: str, where: str, strict: bool):
    """The commands of one logical line. ``strict``: a command behind an unknown
    prefix is reported as a problem (shell blocks); else such lines are skipped."""
    text = re.sub(r"<([A-Za-z][\w-]*)>", r"\1", text)
    try:
        tokens = _tokens(text)
    except ValueError as err:
        if strict and _EMBEDDED.search(text):
            yield DocCommand(where, text, None, (), f"cannot split the line: {err}")
        return
    for segment in _segments(tokens):
        for token in segment[1:]:  # a quoted command: gcloud ... --command="..."
            if " " in token and _EMBEDDED.search(token):
                inner = token.split("=", 1)[1] if token.startswith("-") and "=" in token \
                    else token
                yield from _commands_in(inner, where, strict)
        i = 0
        while i < len(segment) and (n := _wrapper_length(segment, i)):
            i += n
        found = _command_start(segment, i) if i < len(segment) else None
        if found is not None:
            module, first = found
            yield DocCommand(where, " ".join(shlex.quote(t) for t in segment[i:]), module,
                             _clean(segment[first:]))
        elif strict:
            later = [j for j in range(i + 1, len(segment))  # a bare c4jax: a folder (cd c4jax)
                     if segment[j] != "c4jax" and _command_start(segment, j)]
            if later:
                yield DocCommand(where, " ".join(segment), None, (),
                                 f"a command behind an unknown prefix {segment[:later[0]]}")


def doc_commands() -> list[DocCommand]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for lang, lines in _blocks(path):
            if lang not in SHELL_LANGS and lang != "":
                continue
            for number, line in _logical_lines(lines):
                stripped = line.strip()
                if not stripped or stripped.startswith("#"):
                    continue
                if lang == "console":
                    if not stripped.startswith("$ "):
                        continue  # output
                    stripped = stripped[2:]
                elif lang == "" and not _LINE_COMMAND.match(stripped):
                    continue
                found += _commands_in(stripped, f"{rel}:{number}", strict=bool(lang))
    return found


COMMANDS = doc_commands()


def _ids(commands):
    seen: dict[str, int] = {}
    out = []
    for c in commands:
        seen[c.where] = seen.get(c.where, 0) + 1
        out.append(c.where if seen[c.where] == 1 else f"{c.where}#{seen[c.where]}")
    return out


# --- the workspace and the parse strategies ---------------------------------------------


class _Parsed(BaseException):
    """Raised by the patched ``ArgumentParser.parse_args`` once the command line is read."""


class _ParseFailed(BaseException):
    def __init__(self, error: BaseException):
        super().__init__(error)
        self.error = error


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A working directory: ``configs`` (the repository's) and ``runs/`` with an
    AlphaZero run (the newest) and a value-based one, for ``--resume``."""
    from c4jax.alphazero import config as config_lib
    from c4jax.dqn import config as dqn_config

    base = tmp_path_factory.mktemp("doc-commands")
    (base / "configs").symlink_to(ROOT / "configs", target_is_directory=True)
    for name, config, age in (("dqn-run", dqn_config.load("tiny"), 100),
                              ("az-run", config_lib.load("tiny"), 0)):
        path = base / "runs" / name / "config.json"
        path.parent.mkdir(parents=True)
        config_lib.save(config, path)
        stamp = path.stat().st_mtime - age
        os.utime(path, (stamp, stamp))
    return base


def _parse_train(module, argv) -> None:
    from c4jax.alphazero import config as config_lib
    from c4jax.dqn import config as dqn_config

    call = module.parse_args(list(argv))
    if call.kind == "dqn":
        dqn_config.validate(call.config)
    else:
        config_lib.validate(call.config, num_devices=1)


def _parse_main(module, argv) -> None:
    from c4jax.run import compile_cache, xla_flags

    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        try:
            namespace = original(self, args, namespace)
        except BaseException as err:  # noqa: BLE001  (SystemExit, cli.UsageError)
            raise _ParseFailed(err) from err
        raise _Parsed(namespace)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(xla_flags, "enable_fast_cpu", lambda *a, **k: None)
        patch.setattr(compile_cache, "enable", lambda *a, **k: None)
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
        try:
            module.main(list(argv))
        except _Parsed:
            return
        except _ParseFailed as failed:
            raise failed.error from None
    raise AssertionError(f"{module.__name__}.main returned without reading its command line")


def parse(command: DocCommand) -> None:
    """Parses ``command`` as its module does; raises on a parse error."""
    module_name, argv = command.module, list(command.argv)
    if module_name is None:  # c4jax COMMAND ... / python -m c4jax COMMAND ...
        from c4jax import __main__ as dispatcher

        if not argv or argv[0] in ("-h", "--help", "help"):
            assert dispatcher.main(argv) == 0, "c4jax --help did not exit with 0"
            return
        if argv[0] not in dispatcher.COMMANDS:
            raise ValueError(f"unknown command {argv[0]!r}; commands: "
                             f"{', '.join(dispatcher.COMMANDS)}")
        module_name, argv = dispatcher.COMMANDS[argv[0]][0], argv[1:]
    module = importlib.import_module(module_name)
    if module_name in ("c4jax.train", "c4jax.dqn.train"):
        _parse_train(module, argv)
    elif module_name == "c4jax.evaluate":
        args = module.build_parser().parse_args(argv)
        module.check_outputs(args)
    elif module_name == "bench.time_to_strength":
        from c4jax import train

        args, train_argv = module.parse_args(argv)
        _parse_train(train, ["--workdir", str(args.workdir), "--config", args.config,
                             "--keep-checkpoints", str(module.KEEP_ALL), *train_argv])
    elif hasattr(module, "parse_args"):
        module.parse_args(argv)
    else:
        _parse_main(module, argv)


@pytest.mark.parametrize("command", COMMANDS, ids=_ids(COMMANDS))
def test_doc_command_parses(command: DocCommand, workspace, monkeypatch, capsys):
    if command.problem:
        pytest.fail(f"{command.where}: {command.text}\n  {command.problem}", pytrace=False)
    monkeypatch.chdir(workspace)
    error = None
    try:
        parse(command)
    except SystemExit as stop:  # argparse's and tyro's own exits (--help: 0)
        if stop.code not in (0, None):
            lines = capsys.readouterr().err.strip().splitlines()
            error = f"exit {stop.code}: " + (lines[-1] if lines else "(no message)")
    except Exception as err:  # noqa: BLE001  (ValueError, UsageError, OutputError, ...)
        error = f"{type(err).__name__}: {' '.join(str(err).split())}"
    if command.where in ALLOWED_FAILURES:
        assert error is not None, (
            f"{command.where} is in ALLOWED_FAILURES but parses now: drop the entry")
        return
    if error is not None:
        pytest.fail(f"{command.where}: {command.text}\n  {error}", pytrace=False)


def test_the_docs_yield_commands_of_every_kind():
    """Guards the extraction itself: a change that finds nothing must not pass."""
    modules = {c.module for c in COMMANDS}
    assert len(COMMANDS) >= 150, len(COMMANDS)
    assert {"c4jax.train", "c4jax.dqn.train", "c4jax.evaluate", "c4jax.play",
            "c4jax.serve", "c4jax.export", "c4jax.plot", None} <= modules, modules
    assert any(m and m.startswith("bench.") for m in modules), modules


def test_extraction_of_wrappers_and_placeholders():
    text = ("JAX_PLATFORMS=cpu nohup taskset -c 0 python -m bench.bench_train --repeats 5 "
            "[--batch B --steps T] ... 2>&1 | tee log; c4jax play runs/<date-time> # note")
    got = list(_commands_in(text, "x.md:1", strict=True))
    assert [(c.module, c.argv) for c in got] == [
        ("bench.bench_train", ("--repeats", "5", "--batch", "256", "--steps", "16")),
        (None, ("play", "runs/date-time")),
    ]
    quoted = "gcloud ssh X --command=\"cd c4jax && python -m c4jax.train --config tpu\""
    assert [(c.module, c.argv) for c in _commands_in(quoted, "x.md:1", strict=True)] == [
        ("c4jax.train", ("--config", "tpu"))]
    assert _commands_in("sudo python -m c4jax.play", "x.md:1", strict=True).__next__().problem

