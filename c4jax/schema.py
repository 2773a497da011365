"""Typed, frozen configs that check themselves, and their JSON files.

A config is a frozen dataclass of sections (nested frozen dataclasses) and
fields. What a field may hold is written once, beside it: its type annotation
(``int``, ``float``, ``bool``, ``str`` or a ``Literal`` of choices) and, where
the type is not enough, its limits, given with :func:`field`::

    num_blocks: int = schema.field(5, ge=1)
    algorithm: Literal["gumbel", "puct"] = "gumbel"

:func:`check_fields` walks every section and field and raises ``ValueError``
``config field SECTION.NAME: got VALUE, allowed: ...``, with the allowed text
derived from the annotation and limits (``gumbel, puct``, ``an integer >= 1``,
``0..1``). Each engine's ``validate`` adds only the rules that tie several
fields together. :func:`from_dict` builds a config from JSON-ready dicts by
field name (unknown keys are errors, missing ones take the defaults), so
files written by older versions keep loading; :func:`load` reads a preset by
name or a file by path.

``EvalBase`` is the part of periodic evaluation that every engine shares.

This module is base layer: it imports nothing from ``c4jax``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

SOLVER_SETS = ("L1_R1", "L1_R2", "L1_R3", "L2_R1", "L2_R2", "L3_R1")
"""Pons's benchmark sets the mistake-rate sample can draw from."""

_LIMITS_KEY = "c4jax.schema"


@dataclass(frozen=True)
class Limits:
    """What a field may hold beyond its type (kept in the field's metadata)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    even: bool = False
    """The value must be an even number."""
    rule: Callable[[Any], bool] | None = None
    """Any other test of the value alone (called once the type is right)."""
    allowed: str | None = None
    """The allowed text, where the derived one would not say it (required with ``rule``)."""
    note: str | None = None
    """Appended to the allowed text in parentheses, e.g. ``0 = off``."""

    def admits(self, value: Any) -> bool:
        """Whether ``value`` (already of the field's type) keeps within the limits."""
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
            and (not self.even or value % 2 == 0)
            and (self.rule is None or bool(self.rule(value)))
        )


def field(
    default: Any,
    /,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    even: bool = False,
    rule: Callable[[Any], bool] | None = None,
    allowed: str | None = None,
    note: str | None = None,
) -> Any:
    """A dataclass field with ``default`` and limits that :func:`check_fields` enforces.

    ``ge``/``gt``/``le``/``lt``: bounds; ``even``: an even number; ``rule``: any other
    test of the value alone, with ``allowed`` its text; ``allowed`` also replaces the
    derived text elsewhere; ``note`` is appended to it, e.g. ``note="0 = off"``.
    """
    if rule is not None and allowed is None:
        raise TypeError("schema.field: a rule needs its allowed text")
    limits = Limits(ge=ge, gt=gt, le=le, lt=lt, even=even, rule=rule, allowed=allowed, note=note)
    return dataclasses.field(default=default, metadata={_LIMITS_KEY: limits})


def limits_of(f: dataclasses.Field) -> Limits:
    """The limits of a dataclass field (none beyond its type if not made by :func:`field`)."""
    return f.metadata.get(_LIMITS_KEY, Limits())


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # resolves string annotations, inherited fields included


def choices(hint: Any) -> tuple | None:
    """The choices of a ``Literal`` annotation, else None."""
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else None


def _kind(hint: Any) -> type:
    """The plain type a field holds: int, float, bool or str (a Literal: its choices')."""
    options = choices(hint)
    if options is not None:
        kinds = {type(option) for option in options}
        return kinds.pop() if len(kinds) == 1 else object
    return hint


def _is(kind: type, value: Any) -> bool:
    """Whether ``value`` is of ``kind`` (an int is a float; a bool is no number)."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return kind is object or isinstance(value, kind)


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _range_text(limits: Limits) -> str:
    low = (limits.ge, "[") if limits.ge is not None else (limits.gt, "(")
    high = (limits.le, "]") if limits.le is not None else (limits.lt, ")")
    if low[0] is not None and high[0] is not None:
        if low[1] == "[" and high[1] == "]":
            return f"{_number(low[0])}..{_number(high[0])}"
        return f"in {low[1]}{_number(low[0])}, {_number(high[0])}{high[1]}"
    if low[0] is not None:
        return f"{'>=' if low[1] == '[' else '>'} {_number(low[0])}"
    if high[0] is not None:
        return f"{'<=' if high[1] == ']' else '<'} {_number(high[0])}"
    return ""


def allowed_text(hint: Any, limits: Limits) -> str:
    """What a field of annotation ``hint`` with ``limits`` allows, in words."""
    options = choices(hint)
    if limits.allowed is not None:
        text = limits.allowed
    elif options is not None:
        text = ", ".join(str(option) for option in options)
    elif hint is bool:
        text = "true or false"
    elif hint is int:
        bounds = _range_text(limits)
        noun = "an even integer" if limits.even else "an integer"
        text = noun + (f" in {bounds}" if ".." in bounds else f" {bounds}" if bounds else "")
    elif hint is float:
        text = _range_text(limits) or "a finite number"
    else:
        text = f"a {getattr(hint, '__name__', hint)}"
    return f"{text} ({limits.note})" if limits.note else text


def check(ok: bool, name: str, allowed: str, value: Any) -> None:
    """Raises ValueError ``config field NAME: got VALUE, allowed: ALLOWED`` unless ``ok``."""
    if not ok:
        raise ValueError(f"config field {name}: got {_short(value)}, allowed: {allowed}")


def check_fields(config: Any, *, prefix: str = "") -> None:
    """Checks every field of ``config`` and of its sections against its annotation and
    limits: type, a finite number for floats, the choices of a ``Literal``, bounds and
    rules. Raises ValueError naming the first field that fails and what it allows."""
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        name, hint, value = prefix + f.name, hints[f.name], getattr(config, f.name)
        if dataclasses.is_dataclass(hint):
            check(isinstance(value, hint), name, f"a {hint.__name__} section", value)
            check_fields(value, prefix=name + ".")
            continue
        limits = limits_of(f)
        allowed = allowed_text(hint, limits)
        kind = _kind(hint)
        check(_is(kind, value), name, allowed, value)
        if kind is float:
            check(_finite(value), name, "a finite number", value)
        options = choices(hint)
        check(options is None or value in options, name, allowed, value)
        check(limits.admits(value), name, allowed, value)


def field_value(config: Any, dotted: str) -> Any:
    """The value of field ``section.name`` (or ``name``) of a config."""
    value = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def check_unchanged(stored: Any, requested: Any, fields: tuple[str, ...]) -> None:
    """Raises ValueError naming each of ``fields`` (dotted) that differs between the
    config stored with a checkpoint and the one requested for resuming it."""
    problems = [
        f"{name} is {field_value(stored, name)!r} in the checkpoint but "
        f"{field_value(requested, name)!r} now"
        for name in fields
        if field_value(stored, name) != field_value(requested, name)
    ]
    if problems:
        raise ValueError(
            "incompatible checkpoint in the run directory: "
            + "; ".join(problems)
            + ". Use a new --workdir, or drop those overrides."
        )


def to_dict(config: Any) -> dict:
    """The config as plain JSON-ready nested dicts."""
    return dataclasses.asdict(config)


def from_dict(data: dict, cls: type, *, prefix: str = "") -> Any:
    """Builds a (nested) config dataclass from dicts, by field name: missing keys take
    the defaults; unknown keys and values of the wrong type raise ValueError (the
    values themselves are checked by :func:`check_fields`)."""
    if not isinstance(data, dict):
        section = prefix.rstrip(".") or "<root>"
        raise ValueError(f"config section {section}: expected an object, got {data!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    kwargs = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in names:
            raise ValueError(
                f"unknown config field {name!r}; allowed here: {', '.join(sorted(names))}"
            )
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            kwargs[key] = from_dict(value, hint, prefix=name + ".")
        else:
            kwargs[key] = _coerce(name, hint, value)
    return cls(**kwargs)


def _coerce(name: str, hint: Any, value: Any) -> Any:
    """``value`` as the type of annotation ``hint`` (an int becomes a float), or ValueError."""
    kind = _kind(hint)
    if not _is(kind, value):
        raise ValueError(f"config field {name}: got {_short(value)}, expected {kind.__name__}")
    if kind is float and not _finite(value):  # e.g. a JSON integer of 400 digits
        raise ValueError(f"config field {name}: got {_short(value)}, expected a finite number")
    return float(value) if kind is float else value


def _finite(value: float | int) -> bool:
    """Whether ``value`` is a finite float (an int too large for a float is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (a huge number stays readable)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "a number too large to show"
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def config_path(name: str, preset_dir: Path) -> Path:
    """The file ``--config NAME`` names: a file at that path, else for a name without
    a suffix the preset ``preset_dir/NAME.json`` (a directory of that name, such as a
    run's workdir, does not hide the preset)."""
    path = Path(name)
    if not path.suffix and not path.is_file():
        return Path(preset_dir) / f"{name}.json"
    return path


def preset_names(preset_dir: Path) -> list[str]:
    """Names of the presets (``NAME.json``) in ``preset_dir``."""
    return sorted(p.stem for p in Path(preset_dir).glob("*.json"))


def load(path_or_name: str, *, cls: type, preset_dir: Path) -> Any:
    """A ``cls`` config from a preset of ``preset_dir`` by name (``cpu``) or a JSON
    file by path (``configs/cpu.json``); a preset states only what differs from the
    dataclass defaults."""
    path = config_path(path_or_name, preset_dir)
    if not path.is_file():
        raise ValueError(
            f"--config {path_or_name}: no such file; presets: "
            + ", ".join(preset_names(preset_dir))
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"--config {path}: not valid JSON ({err})") from err
    except UnicodeDecodeError as err:
        raise ValueError(f"--config {path}: not a text file (a config is JSON text, "
                         f"UTF-8: {err.reason} at byte {err.start})") from err
    except OSError as err:
        raise ValueError(f"--config {path}: cannot be read "
                         f"({err.strerror or type(err).__name__})") from err
    return from_dict(data, cls)


def save(config: Any, path: Path) -> None:
    """Writes the whole ``config`` (every field) as indented JSON."""
    Path(path).write_text(json.dumps(to_dict(config), indent=2) + "\n")


def _is_solver_sets(value: str) -> bool:
    return all(name in SOLVER_SETS for name in value.split(","))


@dataclass(frozen=True)
class EvalBase:
    """Periodic evaluation during training, as every engine has it."""

    every: int = field(10, ge=0, note="0 = never")
    """Evaluate every this many iterations (0 = never)."""
    games: int = field(64, ge=2, even=True)
    """Games against each reference opponent (half with each colour)."""
    solver_positions: int = field(0, ge=0, note="0 = skip it")
    """Positions of each solver set in the mistake-rate sample (0 = skip it)."""
    solver_sets: str = field(
        "L1_R1,L1_R2,L2_R2",
        rule=_is_solver_sets,
        allowed="a comma-separated subset of " + ",".join(SOLVER_SETS),
    )
    """Comma-separated Pons sets of the mistake-rate sample."""
