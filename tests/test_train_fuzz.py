"""Fuzzing the command line of ``python -m c4jax.train``: whatever config file or
flag value a user gives, the answer is the resolved configuration (exit 0) or
``error:`` lines (exit 2), never a traceback. ``--print-config`` stops before
anything compiles or touches the run directory."""

import dataclasses
import json
import tempfile
from pathlib import Path

import pytest
from commands import run_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from c4jax import train
from c4jax.alphazero import config as config_lib
from c4jax.run import distributed

_SECTIONS = ("network", "search", "train", "eval")
FIELDS = [  # (section or "", field name)
    *((s, f.name) for s in _SECTIONS
      for f in dataclasses.fields(getattr(config_lib.Config(), s))),
    *(("", f.name) for f in dataclasses.fields(config_lib.Config) if f.name not in _SECTIONS),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6,
)
flag_values = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "nan", "-inf", "1e309", "0x10", "True", "none", "gumbel", "puct",
                     "L1_R1,L9_R9", "1_000", "-0", "2.5", "--seed"]),
)


_FIXTURE = [HealthCheck.function_scoped_fixture]  # capsys is read after every example


def _run(argv, capsys):
    """(exit code, stdout, stderr) of ``train.main(argv)`` in this process."""
    return run_main(train.main, argv, capsys)


def _check(code, out, err):
    assert "Traceback" not in err and "Traceback" not in out
    assert code in (0, 2), (code, err[-2000:])
    if code == 0:
        config_lib.validate(config_lib.from_dict(json.loads(out)))
    else:
        assert err.startswith("error: ") and err.count("\n") == 1, err


def _mutate(data, section, name, value):
    target = data[section] if section else data
    target[name] = value
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=_FIXTURE)
@given(
    edits=st.lists(st.tuples(st.sampled_from(FIELDS), json_values), min_size=1, max_size=3),
    drop=st.lists(st.sampled_from(FIELDS), max_size=2),
    extra=st.dictionaries(st.text(max_size=8), json_values, max_size=2),
)
def test_any_config_file_gives_a_config_or_an_error_line(edits, drop, extra, capsys):
    data = config_lib.to_dict(config_lib.load("tiny"))
    for (section, name), value in edits:
        _mutate(data, section, name, value)
    for section, name in drop:
        (data[section] if section else data).pop(name, None)
    data.update(extra)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.json"
        path.write_text(json.dumps(data))
        _check(*_run(["--config", str(path), "--workdir", tmp, "--print-config"], capsys))


@settings(max_examples=50, deadline=None, suppress_health_check=_FIXTURE)
@given(content=st.binary(max_size=64) | json_values.map(json.dumps))
def test_any_file_as_config_gives_a_config_or_an_error_line(content, capsys):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        _check(*_run(["--config", str(path), "--workdir", tmp, "--print-config"], capsys))


def _flag(section, name):
    return "--" + (f"{section}." if section else "") + name.replace("_", "-")


@settings(max_examples=200, deadline=None, suppress_health_check=_FIXTURE)
@given(flags=st.lists(st.tuples(st.sampled_from(FIELDS), flag_values), min_size=1, max_size=3))
def test_any_flag_value_gives_a_config_or_an_error_line(flags, capsys):
    argv = ["--config", "tiny", "--print-config"]
    for (section, name), value in flags:
        argv += [_flag(section, name), value]
    with tempfile.TemporaryDirectory() as tmp:
        _check(*_run([*argv, "--workdir", tmp], capsys))


@settings(max_examples=100, deadline=None, suppress_health_check=_FIXTURE)
@given(flags=st.lists(st.tuples(st.sampled_from(distributed.FLAGS), flag_values), min_size=1,
                      max_size=3))
def test_any_multi_process_flag_value_gives_a_config_or_an_error_line(flags, capsys):
    argv = ["--config", "tiny", "--print-config"]
    for flag, value in flags:
        argv += [flag, value] if len(flags) % 2 else [f"{flag}={value}"]
    with tempfile.TemporaryDirectory() as tmp:
        code, out, err = _run([*argv, "--workdir", tmp], capsys)
    _check(code, out, err)
    if code == 0:
        assert json.loads(out)["distributed"] is True


def test_print_config_shows_the_overrides(capsys):
    code, out, err = _run(["--config", "tiny", "--train.num-iterations", "7", "--print-config"],
                          capsys)
    assert code == 0 and json.loads(out)["train"]["num_iterations"] == 7


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_non_finite_or_negative_learning_rate_is_an_error_line(value, capsys):
    code, _, err = _run(["--config", "tiny", "--train.learning-rate", value, "--print-config"],
                        capsys)
    assert code == 2 and err.startswith("error: ") and "train.learning_rate" in err
