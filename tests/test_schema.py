"""The generic config machinery: a field's type, choices and limits, written once
beside it, are what the checks enforce and what their messages say."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Literal

import pytest

from c4jax import schema


@dataclass(frozen=True)
class Inner:
    """A toy section."""

    mode: Literal["fast", "slow"] = "fast"
    """A choice."""
    size: int = schema.field(4, ge=1)
    """At least one."""
    share: float = schema.field(0.5, ge=0, le=1)
    """Closed interval."""
    rate: float = schema.field(0.1, gt=0, le=1, note="1 = off")
    """Half-open interval, with a note."""
    pairs: int = schema.field(2, ge=2, even=True)
    """An even count."""
    kernel: Literal[1, 3, 5] = 3
    """Integer choices."""
    flag: bool = False
    """A switch."""
    word: str = schema.field("ab", rule=lambda s: s.isalpha(), allowed="letters only")
    """A rule of its own."""


@dataclass(frozen=True)
class Toy:
    """A toy config: one section and a top-level field."""

    inner: Inner = field(default_factory=Inner)
    steps: int = schema.field(3, ge=0, le=9)
    """Bounded both ways."""


def _with(**changes) -> Toy:
    return Toy(inner=dataclasses.replace(Inner(), **changes))


def test_good_values_pass():
    schema.check_fields(Toy())
    schema.check_fields(_with(mode="slow", size=1, share=1.0, rate=1, pairs=8, kernel=5,
                              flag=True, word="xyz"))
    schema.check_fields(Toy(steps=9))


@pytest.mark.parametrize(
    "changes, name, allowed",
    [
        ({"mode": "medium"}, "inner.mode", "fast, slow"),
        ({"mode": 3}, "inner.mode", "fast, slow"),
        ({"size": 0}, "inner.size", "an integer >= 1"),
        ({"size": 2.5}, "inner.size", "an integer >= 1"),
        ({"size": True}, "inner.size", "an integer >= 1"),
        ({"share": 1.5}, "inner.share", "0..1"),
        ({"share": -0.1}, "inner.share", "0..1"),
        ({"rate": 0.0}, "inner.rate", "in (0, 1] (1 = off)"),
        ({"pairs": 3}, "inner.pairs", "an even integer >= 2"),
        ({"pairs": 0}, "inner.pairs", "an even integer >= 2"),
        ({"kernel": 2}, "inner.kernel", "1, 3, 5"),
        ({"flag": 1}, "inner.flag", "true or false"),
        ({"word": "a1"}, "inner.word", "letters only"),
        ({"word": 7}, "inner.word", "letters only"),
    ],
)
def test_each_bad_value_names_the_field_and_what_it_allows(changes, name, allowed):
    (value,) = changes.values()
    expected = f"config field {name}: got {value!r}, allowed: {allowed}"
    with pytest.raises(ValueError) as err:
        schema.check_fields(_with(**changes))
    assert str(err.value) == expected


def test_top_level_fields_are_checked_too():
    with pytest.raises(ValueError, match=r"^config field steps: got 10, allowed: "
                                         r"an integer in 0\.\.9$"):
        schema.check_fields(Toy(steps=10))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10**400],
                         ids=["nan", "inf", "-inf", "10**400"])
def test_non_finite_floats_are_rejected(value):
    with pytest.raises(ValueError, match="config field inner.share: got .*, allowed: a finite"):
        schema.check_fields(_with(share=value))


def test_an_integer_too_large_for_a_float_field_names_the_field():
    """JSON integers have no size limit: an OverflowError was a traceback."""
    with pytest.raises(ValueError, match=r"^config field inner\.share: got 1000.*\(401 "
                                         r"characters\), expected a finite number$"):
        schema.from_dict({"inner": {"share": 10**400}}, Toy)


def test_choices_and_allowed_text_come_from_the_annotation():
    assert schema.choices(Literal["a", "b"]) == ("a", "b")
    assert schema.choices(int) is None
    limits = {f.name: schema.limits_of(f) for f in dataclasses.fields(Inner)}
    assert schema.allowed_text(Literal["fast", "slow"], limits["mode"]) == "fast, slow"
    assert schema.allowed_text(float, limits["share"]) == "0..1"
    assert schema.allowed_text(float, schema.Limits(ge=0, lt=1)) == "in [0, 1)"
    assert schema.allowed_text(float, schema.Limits(gt=0)) == "> 0"
    assert schema.allowed_text(int, schema.Limits(ge=0, le=41, note="0 = off")) == (
        "an integer in 0..41 (0 = off)"
    )


def test_a_rule_needs_its_allowed_text():
    with pytest.raises(TypeError, match="allowed"):
        schema.field("x", rule=str.isalpha)


def test_from_dict_builds_by_name_and_keeps_defaults():
    toy = schema.from_dict({"inner": {"size": 7, "share": 1}, "steps": 2}, Toy)
    assert toy == Toy(inner=Inner(size=7, share=1.0), steps=2)
    assert isinstance(toy.inner.share, float)  # an int is accepted where a float goes
    assert schema.from_dict({}, Toy) == Toy()
    assert schema.from_dict(schema.to_dict(toy), Toy) == toy


@pytest.mark.parametrize(
    "data, message",
    [
        ({"inner": {"bogus": 1}}, "unknown config field 'inner.bogus'; allowed here: "),
        ({"nope": 1}, "unknown config field 'nope'"),
        ({"inner": {"size": "big"}}, "config field inner.size: got 'big', expected int"),
        ({"inner": {"flag": 0}}, "config field inner.flag: got 0, expected bool"),
        ({"inner": {"kernel": 3.0}}, "config field inner.kernel: got 3.0, expected int"),
        ({"inner": {"mode": 1}}, "config field inner.mode: got 1, expected str"),
        ({"inner": 5}, "config section inner: expected an object"),
    ],
)
def test_from_dict_rejects_unknown_keys_and_wrong_types(data, message):
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.")):
        schema.from_dict(data, Toy)


def test_load_save_and_presets(tmp_path):
    (tmp_path / "small.json").write_text(json.dumps({"steps": 1}))
    assert schema.preset_names(tmp_path) == ["small"]
    assert schema.load("small", cls=Toy, preset_dir=tmp_path) == Toy(steps=1)
    schema.save(Toy(steps=5), tmp_path / "full.json")
    assert json.loads((tmp_path / "full.json").read_text())["inner"]["size"] == 4  # every field
    assert schema.load(str(tmp_path / "full.json"), cls=Toy, preset_dir=tmp_path) == Toy(steps=5)
    with pytest.raises(ValueError, match="no such file; presets: full, small"):
        schema.load("missing", cls=Toy, preset_dir=tmp_path)


def test_a_directory_named_like_a_preset_does_not_hide_it(tmp_path, monkeypatch):
    """A run's workdir named after its preset (``--workdir small``)."""
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "small.json").write_text(json.dumps({"steps": 1}))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small").mkdir()
    assert schema.load("small", cls=Toy, preset_dir=presets) == Toy(steps=1)
    (tmp_path / "mine").write_text(json.dumps({"steps": 2}))  # a file without a suffix
    assert schema.load("mine", cls=Toy, preset_dir=presets) == Toy(steps=2)


def test_a_config_file_that_cannot_be_read_as_text_is_one_line_naming_it(tmp_path,
                                                                          monkeypatch):
    binary = tmp_path / "model.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n")  # not UTF-8: a ValueError, but not ours
    with pytest.raises(ValueError) as refused:
        schema.load(str(binary), cls=Toy, preset_dir=tmp_path)
    assert str(refused.value) == (f"--config {binary}: not a text file (a config is JSON "
                                  "text, UTF-8: invalid start byte at byte 0)")
    locked = tmp_path / "locked.json"
    locked.write_text("{}")

    def refuse(self, *args, **kwargs):  # as chmod 000 would, for a user who is not root
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(locked), "read_text", refuse)
    with pytest.raises(ValueError) as refused:  # the commands print a ValueError as one line
        schema.load(str(locked), cls=Toy, preset_dir=tmp_path)
    assert str(refused.value) == f"--config {locked}: cannot be read (Permission denied)"


def test_check_unchanged_names_each_differing_field():
    stored, requested = Toy(), Toy(inner=Inner(size=5), steps=4)
    schema.check_unchanged(stored, Toy(), ("inner.size", "steps"))
    with pytest.raises(ValueError, match=r"inner\.size is 4 in the checkpoint but 5 now; "
                                         r"steps is 3 in the checkpoint but 4 now"):
        schema.check_unchanged(stored, requested, ("inner.size", "steps", "inner.mode"))
    assert schema.field_value(requested, "inner.size") == 5


def test_the_shared_evaluation_base():
    schema.check_fields(schema.EvalBase())
    for changes, name in [({"games": 3}, "games"), ({"every": -1}, "every"),
                          ({"solver_sets": "L1_R1,L9_R9"}, "solver_sets"),
                          ({"solver_positions": -1}, "solver_positions")]:
        with pytest.raises(ValueError, match=f"config field {name}: "):
            schema.check_fields(dataclasses.replace(schema.EvalBase(), **changes))
    schema.check_fields(schema.EvalBase(solver_sets=",".join(schema.SOLVER_SETS)))
