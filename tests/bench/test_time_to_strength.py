"""bench/time_to_strength.py: the first checkpoint at each target, the checkpoints timed
from the launch of a real training process, and a second call that continues."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import time_to_strength


def _row(step, seconds, mean):
    return {"step": step, "seconds": seconds, "mean": mean}


def test_the_first_checkpoint_at_or_below_each_target_counts():
    rows = [_row(30, 300.0, 5.0), _row(10, 100.0, 9.0), _row(20, 200.0, 6.0),
            _row(40, 400.0, 2.5)]
    reached = time_to_strength.first_reaching(rows, (6.0, 3.0, 1.0))
    assert reached == {"6": _row(20, 200.0, 6.0), "3": _row(40, 400.0, 2.5), "1": None}
    assert time_to_strength.first_reaching([], (6.0,)) == {"6": None}


@pytest.mark.parametrize("argv, message", [
    (["--targets", "6,x"], "--targets: got '6,x'"),
    (["--targets", "150"], "allowed: percents in 0..100"),
    (["--sets", "L1_R1,L9_R9"], "--sets: got ['L9_R9']"),
    (["--sims", "-1"], "--sims: got -1"),
    # Judged after the whole training, and refused there (the cap of every command).
    (["--sims", "5000"], "--sims: got 5000, allowed: 0-4096"),
    # It kept 3 checkpoints: those timed were deleted before they were judged.
    (["--", "--keep-checkpoints", "3"], "--keep-checkpoints after --: set here"),
    (["--", "--workdir=elsewhere"], "--workdir after --: give it before --"),
    (["--minutes", "0"], "--minutes: got 0, allowed: a number > 0"),
    # -5 judged all but the last 5 positions; 0 failed after the whole training.
    (["--positions", "-5"], "--positions: got '-5', allowed: a whole number >= 1"),
    (["--positions", "0"], "--positions: got '0', allowed: a whole number >= 1"),
])
def test_bad_arguments_name_the_flag(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        time_to_strength.main(["--workdir", str(tmp_path / "w"), "--out", str(tmp_path / "o"),
                               *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_flags_after_a_double_dash_go_to_the_trainer():
    args, train = time_to_strength.parse_args(
        ["--workdir", "w", "--out", "o", "--", "--train.num-iterations", "3"])
    assert args.config == "cpu" and args.targets == (6.0, 3.0) and args.sims == 64
    assert train == ["--train.num-iterations", "3"]


_TINY = ["--config", "tiny", "--sims", "2", "--sets", "L1_R1,L2_R1", "--positions", "25",
         "--targets", "100,0", "--", "--no-progress", "--train.num-iterations", "3",
         "--checkpoint-every", "1", "--eval.every", "0"]


@pytest.mark.slow
def test_a_tiny_run_is_timed_from_its_launch_judged_and_continued(tmp_path, capsys):
    run, out = tmp_path / "run", tmp_path / "tts"
    argv = ["--workdir", str(run), "--out", str(out), *_TINY]
    assert time_to_strength.main(argv) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["train_command"] == record["command"]
    seconds = record["checkpoint_seconds"]
    assert list(seconds) == ["1", "2", "3"]  # every checkpoint kept and timed
    assert 0 < seconds["1"] <= seconds["2"] <= seconds["3"] <= record["train_seconds"]
    assert record["train_exit_code"] == 0 and record["device"]["cpu_count"] >= 1
    # 100% is reached by the first checkpoint; 0% by none, so all three are judged.
    assert record["targets"]["100"]["step"] == 1
    assert record["targets"]["100"]["seconds"] == seconds["1"]
    assert record["targets"]["0"] is None
    assert [r["step"] for r in record["rows"]] == [1, 2, 3]
    for row in record["rows"]:
        assert set(row["rates"]) == {"L1_R1", "L2_R1"}
        assert row["mean"] == pytest.approx(sum(row["rates"].values()) / 2)
        assert 0 < row["mean"] <= 100
    printed = capsys.readouterr().out
    assert "mean mistake rate <= 100%: " in printed
    assert "mean mistake rate <= 0%: not reached" in printed
    assert out.with_suffix(".png").stat().st_size > 0

    # The same call again: no training, nothing judged twice, the same answer.
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    assert time_to_strength.main(argv) == 0
    assert json.loads(out.with_suffix(".json").read_text())["rows"] == record["rows"]
    assert {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()} == before
    assert "step " not in capsys.readouterr().out

    # Another record for the same, trained folder: refused, its checkpoints untouched.
    assert time_to_strength.main(["--workdir", str(run), "--out", str(tmp_path / "other"),
                                  *_TINY]) == 2
    assert "already has checkpoints" in capsys.readouterr().err


def test_the_devices_are_asked_for_after_the_training(tmp_path, monkeypatch):
    """Asking starts JAX's backend in this process: on a GPU it would take the memory
    the training, a child process, needs."""
    calls = []
    monkeypatch.setattr(time_to_strength, "train_and_watch",
                        lambda *a, **k: calls.append("train") or ({}, 1.0, 3))
    monkeypatch.setattr(time_to_strength.bench_env, "device_info",
                        lambda *a, **k: calls.append("devices") or {})
    out = tmp_path / "tts"
    assert time_to_strength.main(["--workdir", str(tmp_path / "run"), "--out", str(out),
                                  *_TINY]) == 1  # the stand-in training "exited with 3"
    assert calls == ["train", "devices"]


_CHILD = """
import signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append(s))
print("ready", flush=True)
deadline = time.time() + 10
while not got and time.time() < deadline:
    time.sleep(0.05)
time.sleep(1.0)  # a second SIGINT, had one come, would be here by now
open(sys.argv[1], "w").write(str(len(got)))
sys.exit(130)
"""

_WATCHER = """
import signal, subprocess, sys
from pathlib import Path
from bench import time_to_strength
# As in a terminal: a suite run under nohup hands its children SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
real = subprocess.Popen
time_to_strength.subprocess.Popen = (
    lambda command, **kw: real([sys.executable, "-c", sys.argv[1], sys.argv[2]], **kw))
try:
    time_to_strength.train_and_watch([], Path(sys.argv[3]), minutes=None)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM],
                         ids=["ctrl-c at the terminal", "SIGTERM to the group"])
def test_the_training_is_asked_to_stop_once(signum, tmp_path):
    """A Ctrl-C at the terminal reached the training twice, from the terminal and from
    this tool: the second makes it stop without saving. It now runs in a session of
    its own and gets one SIGINT, whatever reached this tool's process group."""
    count = tmp_path / "count"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_WATCHER), textwrap.dedent(_CHILD), str(count),
         str(tmp_path / "w")], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        os.killpg(proc.pid, signum)  # as the terminal does: the whole foreground group
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "interrupted" in out, err
    assert count.read_text() == "1"


def test_a_checkpoint_that_cannot_be_judged_is_one_line_and_the_record_is_kept(
        tmp_path, monkeypatch, capsys):
    """A checkpoint deleted or damaged after it was timed was a traceback after the
    training; the timings are kept and the same command goes on from them."""
    monkeypatch.setattr(time_to_strength, "train_and_watch",
                        lambda *a, **k: ({1: 10.0, 2: 20.0}, 30.0, 0))
    monkeypatch.setattr(time_to_strength.bench_env, "device_info", lambda *a, **k: {})

    def gone(run_dir, *, step, sims):
        raise ValueError(f"{run_dir}: no checkpoint {step}")

    monkeypatch.setattr(time_to_strength.registry, "make_run_agent", gone)
    out = tmp_path / "tts"
    assert time_to_strength.main(["--workdir", str(tmp_path / "run"), "--out", str(out),
                                  *_TINY]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: checkpoint 1: ") and err.count("\n") == 1
    assert "the same command goes on from there" in err
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["checkpoint_seconds"] == {"1": 10.0, "2": 20.0} and record["rows"] == []
