"""What every command line shares: Python warnings as one ``warning:`` line, and tyro's
parse errors as one ``error:`` line with tyro's own "perhaps you meant" suggestions.

The one command line of both trainers is ``c4jax.run.train_command``.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import typing
import warnings
from typing import Annotated

import tyro

from c4jax import inputs


def _one_line(message, category, filename, lineno, line=None) -> str:
    return f"warning: {message}\n"


def one_line_warnings() -> None:
    """Prints Python warnings (e.g. a damaged checkpoint skipped) as ``warning: ...`` lines,
    without the file and source line. For command-line entry points only."""
    warnings.formatwarning = _one_line


# -- tyro's parse errors as one line ----------------------------------------------------


class _ParseError(Exception):
    """Raised from tyro's parse-error hook: the one-line message of a rejected command line."""


def tyro_cli(cls, **kwargs):
    """``tyro.cli(cls, **kwargs)`` whose parse errors raise one ValueError line.

    tyro reports a rejected command line through its parse-error hook
    (``tyro._errors.on_parse_error``) before it draws its panel; the hook turns
    the event (unrecognized options, an invalid choice, a value that does not
    convert, ...) into one line, with tyro's "perhaps you meant" suggestions for
    a misspelt flag. ``--help`` still prints and exits 0.

    Raises:
        ValueError: ``<message> (see: PROG --help)``.
    """
    try:
        from tyro import _errors
    except ImportError:  # a tyro without the hook (before 1.0): its own panel, exit 2
        return tyro.cli(cls, **kwargs)
    flags = known_flags(cls)

    def hook(event) -> None:
        raise _ParseError(" ".join(_describe(event, flags).split()))

    try:
        with _errors.on_parse_error(hook):
            return tyro.cli(cls, **kwargs)
    except _ParseError as err:
        prog = kwargs.get("prog") or "the command"
        raise ValueError(f"{err} (see: {prog} --help)") from None


def _flag(argument) -> str:
    """The flag of one of tyro's argument definitions, as the user writes it."""
    try:
        return argument.display_name()
    except Exception:  # noqa: BLE001 - a tyro whose internals moved: still one line
        names = getattr(getattr(argument, "lowered", None), "name_or_flags", None)
        return names[0] if names else "an option"


def _describe(event, flags: list[str]) -> str:
    """One line for one of tyro's parse-error events (any kind, known or new)."""
    kind = type(event).__name__
    argument = getattr(event, "argument", None)
    if kind == "UnrecognizedArgs":
        tokens = list(event.tokens)
        message = "Unrecognized options: " + ", ".join(tokens)
        meant = [s for t in tokens if t.startswith("--") for s in suggest(t, flags)]
        if meant:
            message += "; perhaps you meant " + _or(list(dict.fromkeys(meant))) + "?"
        return message
    if kind == "InvalidChoice":
        return (f"{_flag(argument)}: invalid choice {event.value!r}; expected one of: "
                + ", ".join(map(str, event.choices)))
    if kind == "InstantiationFailure":
        return f"{_flag(argument)}: {event.message}" if argument is not None else event.message
    if kind == "BadValue":
        if event.reason == "too_few_values":
            return f"{_flag(argument)}: expected a value"
        return f"{_flag(argument)}: cannot take the value {event.offending_value!r}"
    if kind == "MutexConflict":
        return f"{event.first_token} and {event.second_token} cannot be given together"
    if kind == "MissingArgs":
        return "missing: " + ", ".join(_flag(a.arg) for a in event.missing_arguments)
    return f"could not parse the command line ({kind})"


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def known_flags(cls, prefix: str = "") -> list[str]:
    """The long flags tyro makes for the dataclass ``cls`` (``--train.num-iterations``,
    ``--network.bfloat16`` and ``--network.no-bfloat16``, ...); [] for anything else.

    A field annotated ``tyro.conf.arg(name="")`` lends its fields to its parent
    without a prefix; a bool one gets ``--no-`` besides unless marked
    ``tyro.conf.FlagCreatePairsOff``.
    """
    if not dataclasses.is_dataclass(cls):
        return []
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: no suggestions
        return []
    flags = []
    for field in dataclasses.fields(cls):
        hint, extras = hints[field.name], ()
        if typing.get_origin(hint) is Annotated:
            hint, *extras = typing.get_args(hint)
        name = field.name.replace("_", "-")
        if any(getattr(extra, "name", None) == "" for extra in extras):
            flags += known_flags(hint, prefix)
        elif dataclasses.is_dataclass(hint):
            flags += known_flags(hint, f"{prefix}{name}.")
        else:
            flags.append(f"--{prefix}{name}")
            if hint is bool and tyro.conf.FlagCreatePairsOff not in extras:
                flags.append(f"--{prefix}no-{name}")
    return flags


def suggest(token: str, flags: list[str], limit: int = 3) -> list[str]:
    """Flags close to the unrecognized ``token``, best first (tyro's measure: a flag
    holding every dotted part of the token, else a close spelling)."""
    word = token.split("=", 1)[0]
    parts = word[2:].split(".")

    def score(flag: str) -> float:
        if len(word) >= 4 and all(part in flag for part in parts):
            return 0.9 + difflib.SequenceMatcher(a=word, b=flag).ratio() / 100
        return difflib.SequenceMatcher(a=word, b=flag).ratio()

    scored = sorted(((score(f), f) for f in flags if f != word), reverse=True)
    return [flag for s, flag in scored if s >= 0.8][:limit]


# -- the trainers' command line -----------------------------------------------------------


# ``--step`` of play and serve: an iteration 0..inputs.MAX_STEP, ``last`` or ``best``.
checkpoint_step = inputs.step_arg("--step")


class UsageError(Exception):
    """argparse's complaint about a command line, as one line."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise ``UsageError`` (one line, pointing at
    ``--help``) instead of printing the usage and exiting."""

    def error(self, message: str):
        raise UsageError(f"{message} (see: {self.prog} --help)")
