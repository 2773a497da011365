"""Output files: checked before the work (leaving nothing behind), written whole."""

from __future__ import annotations

import errno
import os

import pytest
from faults import fill, small_fs  # a real tmpfs: read-only, or full

from c4jax.store import outputs


def test_check_output_refuses_a_folder_and_a_read_only_file(tmp_path):
    with pytest.raises(outputs.OutputError, match="is a folder; give a file path"):
        outputs.check_output(tmp_path, name="--json")
    outputs.check_output(tmp_path / "new" / "sub" / "r.json", name="--json")
    outputs.check_output_folder(tmp_path / "plots", name="--out")
    assert os.listdir(tmp_path) == []  # a check leaves no folder and no probe file
    written = outputs.write_output(tmp_path / "new" / "r.json", lambda p: p.write_text("{}"),
                                name="--json")
    assert written.read_text() == "{}" and os.listdir(tmp_path / "new") == ["r.json"]


def test_write_whole_leaves_the_old_file_on_a_full_disk(tmp_path):
    with small_fs(tmp_path / "fs", "64k") as disk:
        path = outputs.write_text(disk / "config.json", "old\n")
        fill(disk)
        with pytest.raises(OSError) as failed:
            outputs.write_text(path, "new, and longer than a page: " + "x" * 8192)
        assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(path)
        assert path.read_text() == "old\n"
        assert sorted(os.listdir(disk)) == ["config.json", "filler"]  # no temporary left


def test_an_output_on_a_full_disk_is_exit_74_and_names_it(tmp_path):
    with small_fs(tmp_path / "fs", "64k") as disk:
        fill(disk)
        with pytest.raises(outputs.OutputError) as failed:
            outputs.check_output(disk / "r.json", name="--json")
    assert failed.value.code == outputs.EXIT_IO == 74
    assert str(failed.value).startswith(f"--json: cannot write {str(disk / 'r.json')!r}: ")
    assert "free some space" in str(failed.value)
