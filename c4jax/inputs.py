"""Whole numbers a user types: ASCII digits only, within stated bounds.

Every number that comes from a person (a column in ``play``, ``--sims``,
``--batch-size``, ``--games``, the ``N`` of an agent spec, a web request's
``sims``) goes through ``parse_count``, so that all of them accept the same
text and refuse the rest with the same kind of message:

    >>> parse_count("64", name="--sims", low=0, high=MAX_SIMULATIONS)
    64
    >>> parse_count("²", name="--sims", low=0, high=MAX_SIMULATIONS)
    Traceback (most recent call last):
    ...
    c4jax.inputs.InputError: --sims: got '²', allowed: a whole number 0-4096

Python's ``int()`` and ``str.isdigit()`` accept far more than a user means:
``"٣"`` (Arabic-Indic three), ``" 7 "``, ``"1_000"``, ``"+5"``, and
``"²"`` passes ``isdigit()`` but fails ``int()``. A 100,000-digit line costs
seconds in ``int()`` and then a traceback. Here only ``0-9`` are digits, and a
text longer than the largest allowed value is refused before it is converted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

# The most search simulations any command or the web server runs for one move:
# one cap for all, so that a typo cannot run a search until the kernel's OOM
# killer stops it (memory grows with the number of simulations).
MAX_SIMULATIONS = 4096
MAX_STEP = 10**9  # the largest checkpoint step (iteration) a user may name
# The largest PRNG seed: JAX keeps a seed's low 32 bits (2**32 gives seed 0's key, -1
# that of 2**32 - 1), so a larger or negative seed would repeat another run silently.
MAX_SEED = 2**32 - 1

_ASCII_DIGITS = frozenset("0123456789")
STEP_WORDS = ("last", "best")  # a checkpoint named by a word, not by its step
_SHOWN = 40  # characters of a bad input repeated in a message


class InputError(ValueError):
    """A number typed by a user that is not an allowed whole number."""


def allowed(low: int, high: int | None) -> str:
    """How the bounds read in a message: ``0-4096`` or ``>= 1``."""
    return f">= {low}" if high is None else f"{low}-{high}"


def shown(text: str) -> str:
    """``text`` as a message repeats it: quoted, and cut when long (its quoted form
    at most ``_SHOWN`` + 2 characters: a character shown as an escape such as
    ``\\U0001093a`` counts as ten)."""
    quoted = repr(text)
    if len(quoted) <= _SHOWN + 2:
        return quoted
    cut = text[:_SHOWN]
    while len(repr(cut)) > _SHOWN + 2:
        cut = cut[:-1]
    return repr(cut) + f"... ({len(text)} characters)"


def parse_count(text: str, *, name: str, low: int = 0, high: int | None = None) -> int:
    """``text`` as a whole number ``low <= n <= high`` (``high`` None: no upper bound).

    Args:
        text: what the user typed; only the ASCII digits 0-9 are accepted (no
            sign, space, underscore or other script's digits).
        name: what the number is, as the message names it (``--sims``, ``column``).
        low, high: the bounds, both included.

    Raises:
        InputError: with ``name``, the text (cut when long) and the bounds.
    """
    if not isinstance(text, str):
        raise InputError(f"{name}: got {text!r}, allowed: a whole number {allowed(low, high)}")
    longest = len(str(high)) if high is not None else 18
    if not text or not set(text) <= _ASCII_DIGITS:
        raise InputError(
            f"{name}: got {shown(text)}, allowed: a whole number {allowed(low, high)}"
        )
    if len(text.lstrip("0")) > longest:  # too large: refused before a slow int()
        big = text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} digits)"
        raise InputError(f"{name}: got {big}, allowed: {allowed(low, high)}")
    value = int(text.lstrip("0") or "0")  # leading zeros count in int()'s digit limit
    if value < low or (high is not None and value > high):
        raise InputError(f"{name}: got {value}, allowed: {allowed(low, high)}")
    return value


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``str.isdigit`` also takes ``²``)."""
    return bool(text) and set(text) <= _ASCII_DIGITS


def check_count(value: int, *, name: str, low: int = 0, high: int | None = None) -> int:
    """An ``int`` that came another way (JSON, a Python call) held to the same bounds.

    Raises:
        InputError: ``value`` is not an ``int`` (``bool`` included) or is out of bounds.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name}: got {value!r}, allowed: a whole number {allowed(low, high)}")
    if value < low or (high is not None and value > high):
        raise InputError(f"{name}: got {value}, allowed: {allowed(low, high)}")
    return value


def count_arg(name: str, *, low: int = 0, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=`` that parses with ``parse_count``.

    argparse prints ``error: argument --sims: ...`` with the reason, and exits 2.
    """

    def parse(text: str) -> int:
        try:
            return parse_count(text, name=name, low=low, high=high)
        except InputError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"{name}: ")) from None

    parse.__name__ = name.lstrip("-").replace("-", "_")  # argparse names the type on failure
    return parse


def step_arg(name: str = "--step") -> Callable[[str], int | str]:
    """An argparse ``type=`` for a checkpoint: an iteration ``0..MAX_STEP`` (ASCII
    digits), ``last`` or ``best``."""
    count = count_arg(name, low=0, high=MAX_STEP)

    def parse(text: str) -> int | str:
        if text in STEP_WORDS:
            return text
        if not is_digits(text):
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not a checkpoint step: give an iteration, last or best"
            )
        return count(text)

    parse.__name__ = "checkpoint_step"
    return parse


# --- Durations: a wall-time budget such as 2h, 90m or 1h30m. ---

MAX_DURATION = 30 * 24 * 3600  # seconds: a month; a longer budget is a typo
DURATION_FORMS = "a duration such as 2h, 90m, 1h30m or 45s"
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str, *, name: str) -> int:
    """``text`` as whole seconds: ASCII digits each followed by a unit, the units
    ``d h m s`` in that order, each at most once (``2h``, ``1h30m``, ``90m``,
    ``45s``), more than 0 and at most ``MAX_DURATION``.

    Raises:
        InputError: naming ``name``, the text and the forms allowed.
    """
    bad = InputError(f"{name}: got {shown(str(text))}, allowed: {DURATION_FORMS}")
    if not isinstance(text, str) or not text or len(text) > 32:
        raise bad
    total, number, order = 0, "", list(_UNITS)
    for char in text:
        if char in _ASCII_DIGITS:
            number += char
        elif char in order and number:
            order = order[order.index(char) + 1:]  # each unit once, largest first
            total += int(number) * _UNITS[char]
            number = ""
        else:
            raise bad
    if number or total == 0:
        raise bad
    if total > MAX_DURATION:
        raise InputError(f"{name}: got {text} ({total} s), allowed: at most 30 days")
    return total


def is_duration(text: str) -> bool:
    """Whether ``parse_duration`` takes ``text``."""
    try:
        parse_duration(text, name="duration")
    except InputError:
        return False
    return True
