"""Exported networks: checksums checked on every load, real bit flips in the shipped
agent found with one line that says to reinstall, NaN variables and unreadable
config.json/info.json named. (The export command line is in tests/test_export.py.)"""

import json
import shutil

import numpy as np
import pytest
from flax import serialization

from c4jax.store import exported

REINSTALL = "reinstall c4jax (pip install --force-reinstall c4jax)"


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """A copy of the shipped agent that the package takes for its own."""
    copy = tmp_path / "pretrained"
    shutil.copytree(exported.PRETRAINED_DIR, copy)
    monkeypatch.setattr(exported, "PRETRAINED_DIR", copy)
    return copy


def _flip(path, bit):
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def _shipped_error(**kwargs) -> str:
    with pytest.raises(exported.DamagedPretrainedError) as raised:
        exported.load_exported(**kwargs)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("the shipped pretrained agent is damaged (")
    assert message.endswith(f"): {REINSTALL}"), message
    return message


def test_the_shipped_agent_carries_matching_checksums():
    sums = json.loads((exported.PRETRAINED_DIR / exported.CHECKSUMS_FILE).read_text())
    assert set(sums["files"]) == {"variables.msgpack", "config.json"}
    assert exported.load_exported().step > 0


def test_every_flipped_bit_in_the_shipped_agent_is_found(shipped_copy):
    variables = shipped_copy / exported.VARIABLES_FILE
    rng = np.random.default_rng(0)
    for bit in rng.choice(variables.stat().st_size * 8, size=24, replace=False):
        _flip(variables, int(bit))
        message = _shipped_error()
        assert "(variables.msgpack: does not match its SHA-256 in checksums.json)" in message
        _flip(variables, int(bit))
    config = shipped_copy / exported.CONFIG_FILE
    _flip(config, 8 * config.read_bytes().index(b'"channels": 48') + 8 * 13)  # 48 -> 49
    assert "(config.json: does not match its SHA-256" in _shipped_error()


def test_a_shipped_agent_without_its_files_says_to_reinstall(shipped_copy):
    (shipped_copy / exported.CHECKSUMS_FILE).unlink()
    assert "(checksums.json: is missing)" in _shipped_error()
    (shipped_copy / exported.CHECKSUMS_FILE).write_text("{")
    assert "(checksums.json: unreadable" in _shipped_error()
    (shipped_copy / exported.VARIABLES_FILE).unlink()
    assert "(variables.msgpack: is missing)" in _shipped_error(directory=shipped_copy)


def _older_export(tmp_path, variables=None):
    """An export as c4jax wrote them before checksums.json."""
    out = tmp_path / "older"
    out.mkdir()
    for name in (exported.CONFIG_FILE, exported.INFO_FILE):
        shutil.copy(exported.PRETRAINED_DIR / name, out / name)
    data = (exported.PRETRAINED_DIR / exported.VARIABLES_FILE).read_bytes()
    if variables is not None:
        data = serialization.msgpack_serialize(variables(serialization.msgpack_restore(data)))
    (out / exported.VARIABLES_FILE).write_bytes(data)
    return out


def test_an_export_without_checksums_still_loads(tmp_path):
    loaded = exported.load_exported(_older_export(tmp_path))
    assert loaded.step == exported.load_exported().step


def test_nan_variables_are_damage_with_or_without_checksums(tmp_path):
    def poison(variables):
        variables["params"]["Dense_0"]["bias"] = variables["params"]["Dense_0"]["bias"] * np.inf
        return variables

    out = _older_export(tmp_path, poison)
    with pytest.raises(exported.DamagedExportError, match="params/Dense_0/bias holds NaN"):
        exported.load_exported(out)
    exported.write_checksums(out)  # checksums of a bad network: still refused
    with pytest.raises(exported.DamagedExportError, match="variables.msgpack: params/Dense_0"):
        exported.load_exported(out)


@pytest.mark.parametrize("text", ["{", "[1, 2]", '{"step": "x"}', '{"step": -1}', "\udcff"])
def test_an_unreadable_info_json_is_one_line_naming_it(tmp_path, text):
    out = _older_export(tmp_path)
    (out / exported.INFO_FILE).write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(exported.DamagedExportError) as raised:
        exported.load_exported(out)
    assert str(raised.value).startswith(f"{out / exported.INFO_FILE}: unreadable (")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("text", ["{", "[]", '{"network": 5}', '{"network": {"chanels": 4}}'])
def test_an_unreadable_config_json_is_one_line_naming_it(tmp_path, text):
    out = _older_export(tmp_path)
    (out / exported.CONFIG_FILE).write_text(text)
    with pytest.raises(exported.DamagedExportError) as raised:
        exported.load_exported(out)
    message = str(raised.value)
    assert message.startswith(f"{out / exported.CONFIG_FILE}: not a readable c4jax configuration")
    assert "\n" not in message


def _halved(checkpoint):
    """The same network with every variable halved, a step on (a new export)."""
    import dataclasses

    import jax

    return dataclasses.replace(checkpoint, step=checkpoint.step + 1,
                               variables=jax.tree.map(lambda x: np.asarray(x) / 2,
                                                      checkpoint.variables))


def _same(a, b) -> bool:
    import jax

    return a.step == b.step and all(jax.tree.leaves(jax.tree.map(
        lambda x, y: bool(np.array_equal(x, y)), a.variables, b.variables)))


@pytest.mark.parametrize("failing", ["write_checksums", "fsync"])
def test_an_export_that_fails_leaves_the_one_already_there(tmp_path, monkeypatch, failing):
    """A full disk while re-exporting into a folder (as ``export network RUN
    c4jax/pretrained`` does): the export there before still loads, whole, and nothing
    of the failed one is left behind."""
    import errno
    import os

    first = exported.load_exported()
    out = tmp_path / "agent"
    exported.export_network(first, out, {"note": "first"})
    (out / "README").write_text("mine")  # a file of the user's, kept
    before = sorted(p.name for p in out.iterdir())

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if failing == "write_checksums":
        monkeypatch.setattr(exported, "write_checksums", full)
    else:  # the disk fills while the last files are synced: no file was replaced yet
        real_fsync = os.fsync
        calls = []

        def fsync(fd):
            calls.append(fd)
            if len(calls) == len(exported._WRITTEN):
                full()
            return real_fsync(fd)

        monkeypatch.setattr(exported.os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left"):
        exported.export_network(_halved(first), out, {"note": "second"})
    assert sorted(p.name for p in out.iterdir()) == before
    assert _same(exported.load_exported(out), first)
    assert json.loads((out / exported.INFO_FILE).read_text())["note"] == "first"


def test_an_export_replaces_the_one_there_and_sweeps_what_a_killed_one_left(tmp_path):
    first = exported.load_exported()
    out = tmp_path / "agent"
    exported.export_network(first, out, {})
    (out / ".export-killed").mkdir()  # a process ended by SIGKILL while writing
    (out / ".export-killed" / exported.VARIABLES_FILE).write_bytes(b"partial")
    second = _halved(first)
    exported.export_network(second, out, {})
    assert _same(exported.load_exported(out), second)
    assert sorted(p.name for p in out.iterdir()) == sorted(exported._WRITTEN)
