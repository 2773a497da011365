"""Output files: checked before the work (leaving nothing behind), written whole."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

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


def test_a_failing_writer_or_a_ctrl_c_leaves_no_temporary_and_the_old_file(tmp_path):
    path = outputs.write_text(tmp_path / "plot.png", "old")

    def fails(error):
        def write(tmp):
            tmp.write_text("half")
            raise error
        return write

    for error in (ValueError("savefig refused"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            outputs.write_whole(path, fails(error))
        assert os.listdir(tmp_path) == ["plot.png"] and path.read_text() == "old"


_INTERRUPTED_WRITE = """
import os, signal, sys, time
from pathlib import Path
from c4jax.run import interrupt
from c4jax.store import outputs
interrupt.exit_on_interrupt("Interrupted.")
path = Path(sys.argv[1])
outputs.write_text(path, "old")

def write(tmp):
    tmp.write_text("half")
    print("writing", flush=True)
    time.sleep(60)

outputs.write_output(path, write, name="--plot")
"""


@pytest.mark.slow
def test_a_commands_ctrl_c_while_writing_leaves_no_temporary_and_the_old_file(tmp_path):
    """A command's Ctrl-C ends the process at once (``interrupt.exit_now``), past
    ``write_whole``'s cleanup: the temporary file (``plot`` renders a figure into
    it) was left behind; the old file stays."""
    path = tmp_path / "plot.png"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_INTERRUPTED_WRITE), str(path)],
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(root)}, cwd=root,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "writing\n"
        assert len(os.listdir(tmp_path)) == 2  # the old file and the temporary one
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Interrupted." in err
    assert os.listdir(tmp_path) == ["plot.png"] and path.read_text() == "old"


def test_a_name_too_long_is_refused_before_the_work_and_the_longest_one_is_written(tmp_path):
    with pytest.raises(outputs.OutputError, match="cannot write") as refused:
        outputs.check_output(tmp_path / ("r" * 300 + ".json"), name="--json")
    assert refused.value.code == 2
    longest = tmp_path / ("r" * 250 + ".json")  # 255 bytes: a temporary named after it is not
    outputs.check_output(longest, name="--json")
    assert os.listdir(tmp_path) == []
    outputs.write_text(longest, "{}")
    assert os.listdir(tmp_path) == [longest.name] and longest.read_text() == "{}"
