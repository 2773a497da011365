"""Whole numbers a user types: only ASCII digits within bounds, one kind of message."""

from __future__ import annotations

import argparse
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from c4jax import inputs
from c4jax.inputs import InputError, check_count, count_arg, parse_count


@pytest.mark.parametrize("text, value", [("0", 0), ("7", 7), ("064", 64), ("4096", 4096)])
def test_accepts_ascii_digits_within_bounds(text, value):
    assert parse_count(text, name="--sims", low=0, high=inputs.MAX_SIMULATIONS) == value


@pytest.mark.parametrize(
    "text",
    ["", " 7", "7 ", "+5", "-1", "1_000", "1e3", "3.0", "٣", "²", "①", "７", "0x10", "seven"],
)
def test_refuses_what_int_would_take_or_crash_on(text):
    with pytest.raises(InputError, match=r"^--sims: got .*allowed: a whole number 0-4096$"):
        parse_count(text, name="--sims", low=0, high=4096)


def test_out_of_bounds_names_the_bounds():
    with pytest.raises(InputError, match=r"^column: got 8, allowed: 1-7$"):
        parse_count("8", name="column", low=1, high=7)
    with pytest.raises(InputError, match=r"^--batch-size: got 0, allowed: >= 1$"):
        parse_count("0", name="--batch-size", low=1)


def test_a_huge_line_is_refused_at_once_and_shown_cut():
    text = "9" * 100_000
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        parse_count(text, name="--sims", low=0, high=4096)
    assert time.perf_counter() - start < 1.0  # no 100,000-digit int() (wide margin)
    assert "(100000 digits)" in str(err.value)
    assert len(str(err.value)) < 200
    with pytest.raises(InputError):  # no upper bound: still no unbounded conversion
        parse_count(text, name="--games", low=1)


def test_text_is_shown_quoted_and_cut_by_its_quoted_length():
    assert inputs.shown("runs/X") == "'runs/X'"
    assert inputs.shown("a" * 40) == repr("a" * 40)
    assert inputs.shown("a" * 41) == repr("a" * 40) + "... (41 characters)"
    # Characters shown as escapes are ten each: 18 of them were a 184-character quote.
    escaped = inputs.shown("\U0001093a" * 18)
    assert escaped == repr("\U0001093a" * 4) + "... (18 characters)", escaped
    assert len(inputs.shown("\n" * 10_000)) < 80


def test_leading_zeros_past_pythons_digit_limit_are_a_number_not_a_crash():
    """int() counts leading zeros toward its 4300-digit limit (a ValueError)."""
    assert parse_count("0" * 5000 + "64", name="--sims", high=4096) == 64
    assert parse_count("0" * 5000, name="--sims", high=4096) == 0
    with pytest.raises(InputError, match="^--sims: got 5000, allowed: 0-4096$"):
        parse_count("0" * 5000 + "5000", name="--sims", high=4096)


def test_check_count_holds_json_values_to_the_same_bounds():
    assert check_count(64, name="sims", high=4096) == 64
    for bad in (True, 1.5, "64", None, 5000, -1):
        with pytest.raises(InputError, match=r"^sims: got "):
            check_count(bad, name="sims", high=4096)


def test_count_arg_gives_argparse_a_one_line_error(capsys):
    parser = argparse.ArgumentParser(prog="c4jax-test")
    parser.add_argument("--sims", type=count_arg("--sims", high=inputs.MAX_SIMULATIONS))
    assert parser.parse_args(["--sims", "12"]).sims == 12
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--sims", "100000000"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "c4jax-test: error: argument --sims: got 100000000, allowed: 0-4096"


@given(st.text(max_size=30))
def test_any_text_gives_a_number_in_bounds_or_an_input_error(text):
    try:
        value = parse_count(text, name="n", low=1, high=999)
    except InputError:
        assert not (text.isascii() and text.isdigit() and 1 <= int(text) <= 999)
    else:
        assert 1 <= value <= 999 and text.isascii() and text.isdigit()


def test_a_checkpoint_step_is_an_iteration_last_or_best():
    step = inputs.step_arg("--step")
    assert [step(t) for t in ("0", "40", "last", "best")] == [0, 40, "last", "best"]
    assert step(str(inputs.MAX_STEP)) == inputs.MAX_STEP
    for bad, why in [("newest", "is not a checkpoint step"), ("²", "is not a checkpoint step"),
                     (str(inputs.MAX_STEP + 1), "allowed: 0-1000000000"),
                     ("9" * 100_000, "(100000 digits)")]:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(why)):
            step(bad)


@pytest.mark.parametrize(("text", "seconds"), [
    ("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("1d2h", 93600), ("007m", 420),
])
def test_a_duration_is_digits_and_units(text, seconds):
    assert inputs.parse_duration(text, name="--train.time-budget") == seconds
    assert inputs.is_duration(text)


@pytest.mark.parametrize("text", ["", "2", "h", "0h", "2h2h", "30m1h", "1.5h", "2 h", "٣h",
                                  "-1h", "2H", "9" * 40 + "h"])
def test_a_bad_duration_names_the_option_and_the_forms(text):
    with pytest.raises(inputs.InputError, match=r"^--train.time-budget: got .*, allowed: a "
                                                r"duration such as 2h"):
        inputs.parse_duration(text, name="--train.time-budget")
    assert not inputs.is_duration(text)


def test_a_duration_over_a_month_is_refused():
    with pytest.raises(inputs.InputError, match="at most 30 days"):
        inputs.parse_duration("31d", name="budget")
