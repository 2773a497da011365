"""The run's log: metrics.jsonl, TensorBoard files readable by TensorBoard, and
progress as plain lines with an ETA that ignores the compiling iteration."""

import errno
import io
import json
import threading
from pathlib import Path

import pytest
from faults import fill, small_fs  # a real tmpfs: read-only, or full

from c4jax.run import runlog


def test_lines_mode_prints_one_line_per_iteration_with_a_post_compile_eta(tmp_path, capsys):
    log = runlog.RunLog(tmp_path, total=10, initial=0, mode="lines")
    log.compiling("compiling...")
    log.log(1, {"loss": 2.5, "seconds": 120.0})  # includes compiling: not in the ETA
    log.log(2, {"loss": 2.4, "seconds": 10.0, "win_rate/random": 0.75})
    log.log(3, {"loss": 2.3, "seconds": 20.0})
    log.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "compiling..."
    assert lines[1].startswith("iteration 1/10  loss 2.500") and "eta after compiling" in lines[1]
    assert "vs random 0.75" in lines[2] and lines[2].endswith("eta 80 s")  # 10 s x 8 left
    assert lines[3].endswith("eta 2 min")  # mean(10, 20) x 7 left = 105 s
    assert len(lines) == 4


def test_a_new_total_changes_the_lines_and_the_eta(tmp_path, capsys):
    log = runlog.RunLog(tmp_path, total=10, initial=0, mode="lines")
    log.log(1, {"seconds": 60.0})  # compiling
    log.log(2, {"seconds": 10.0})
    log.set_total(20)  # a time budget measured again
    log.log(3, {"seconds": 10.0})
    log.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("iteration 2/10") and lines[1].endswith("eta 80 s")
    assert lines[2].startswith("iteration 3/20")
    assert lines[2].endswith("eta 3 min")  # 10 s x 17 left


def test_a_new_total_moves_the_bar_s_end_and_a_note_goes_above_the_bar(tmp_path):
    stream = io.StringIO()
    log = runlog.RunLog(tmp_path, total=10, initial=0, mode="bar", stream=stream, columns=100)
    log.log(1, {"seconds": 1.0})
    log.note("time budget 2h: so 1500 iterations in all")
    log.set_total(1500)
    log.log(2, {"seconds": 1.0})
    log.close()
    shown = stream.getvalue()
    # On a line of its own: the bar is cleared, the note written, the bar drawn again.
    assert "\rtime budget 2h: so 1500 iterations in all\n" in shown.replace("\x1b[A", "")
    assert "| 0/10 [" in shown and shown.rstrip().endswith("| 2/1500 [00:00, 1.0 s/it, eta 25 min]")


def test_off_mode_prints_nothing_but_still_logs(tmp_path, capsys):
    log = runlog.RunLog(tmp_path, total=2, initial=0, mode="off")
    log.compiling("compiling...")
    log.log(1, {"loss": 1.0})
    log.close()
    assert capsys.readouterr().out == ""
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {"step": 1, "loss": 1.0}


def test_resuming_drops_records_after_the_checkpoint(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s}) + "\n" for s in (1, 2, 3)) + '{"step": 4, "lo\n'
    )
    log = runlog.RunLog(tmp_path, total=5, initial=2, mode="off")
    log.log(3, {"loss": 0.5})
    log.close()
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").open()]
    assert steps == [1, 2, 3]


def test_tensorboard_reads_the_event_files(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    log = runlog.RunLog(tmp_path, total=3, initial=0, mode="off")
    for step, loss in [(1, 3.0), (2, 2.0), (3, 1.5)]:
        log.log(step, {"loss": loss})
    log.close()
    events = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 3.0), (2, 2.0), (3, 1.5)]


@pytest.mark.parametrize(
    "seconds, text", [(42, "42 s"), (600, "10 min"), (3900, "1 h 05 min"), (-1, "0 s")]
)
def test_format_duration(seconds, text):
    assert runlog.format_duration(seconds) == text


_ALL_METRICS = {
    "loss": 2.345, "policy_entropy": 1.234, "game_length": 23.4, "win_rate/random": 0.99,
    "win_rate/win-if-you-can": 0.95, "win_rate/lookahead": 0.8, "mistake_rate": 0.123,
    "seconds": 123.4,
}


@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_keeps_seconds_per_iteration_and_the_eta_in_a_fixed_width(tmp_path, columns):
    stream = io.StringIO()
    log = runlog.RunLog(tmp_path, total=280, initial=0, mode="bar", stream=stream, columns=columns)
    for step in (1, 2, 3):  # every iteration with the evaluation fields
        log.log(step, _ALL_METRICS)
    log.close()
    frames = [f.strip("\n") for f in stream.getvalue().split("\r") if f.strip()]
    assert all(len(frame) <= columns for frame in frames), frames
    last = frames[-1]
    assert "3/280" in last and last.endswith("]")  # nothing cut off at the end
    assert "123.4 s/it, eta " in last and "loss 2.345" in last
    if columns == 120:  # room for the evaluation results, before entropy and length
        assert "vs lookahead 0.80" in last and "mistakes 0.123" in last


def test_the_bar_leaves_out_what_does_not_fit_and_the_lines_keep_everything(tmp_path, capsys):
    assert set(runlog._BAR_PRIORITY) == {key for key, _, _ in runlog._SHOWN}
    fields = {"loss": "loss 2.345", "policy_entropy": "entropy 1.23", "mistake_rate": "mistakes 0"}
    assert runlog._fit(["1.0 s/it", "eta 5 s"], fields, 45) == (
        "1.0 s/it, eta 5 s, loss 2.345, mistakes 0"  # entropy has the lower priority
    )
    assert runlog._fit(["1.0 s/it", "eta 5 s"], fields, 10) == "1.0 s/it, eta 5 s"
    log = runlog.RunLog(tmp_path, total=280, initial=0, mode="lines")
    log.log(1, _ALL_METRICS)
    log.close()
    line = capsys.readouterr().out
    assert "\r" not in line and line.count("\n") == 1
    assert "vs win-if-you-can 0.95" in line and "length 23.4" in line and "s/it" in line


# -- files that vanish, fill up or cannot be written --------------------------------------


def _steps(path):
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_a_metrics_file_deleted_during_the_run_is_written_again_whole(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')  # a resumed run's first line
    log = runlog.RunLog(tmp_path, total=5, initial=1, mode="off")
    log.log(2, {"loss": 1.0})
    (tmp_path / "metrics.jsonl").unlink()
    with pytest.warns(UserWarning, match=r"metrics\.jsonl was deleted or replaced during the "
                                         r"run: wrote it again with the 2 lines logged so far"):
        log.log(3, {"loss": 0.5})
    assert _steps(tmp_path / "metrics.jsonl") == [1, 2, 3]
    (tmp_path / "metrics.jsonl").rename(tmp_path / "old.jsonl")  # moved away: a new one
    (tmp_path / "metrics.jsonl").write_text("someone's text\n")
    with pytest.warns(UserWarning, match="the 3 lines"):
        log.log(4, {"loss": 0.25})
    log.log(5, {"loss": 0.125})
    log.close()
    assert _steps(tmp_path / "metrics.jsonl") == [1, 2, 3, 4, 5]


def test_a_full_disk_raises_an_oserror_naming_the_file_and_never_blocks(tmp_path):
    """A real full disk (a 256 KiB tmpfs): the write fails at once with ENOSPC naming
    the file, in the caller; before, TensorBoard's writer thread died and ``log``
    waited on its queue for good."""
    with small_fs(tmp_path / "fs", "256k") as fs:
        log = runlog.RunLog(fs, total=10**6, initial=0, mode="off")
        fill(fs)
        outcome = {}

        def log_until_it_fails():
            try:
                for step in range(1, 10**6):
                    log.log(step, {f"metric{i}": float(i) for i in range(40)})
            except OSError as err:
                outcome["error"] = err
            log.close()  # after the failure: no second error, no wait
            outcome["closed"] = True

        worker = threading.Thread(target=log_until_it_fails, daemon=True)
        worker.start()
        worker.join(timeout=60)
        assert not worker.is_alive(), "RunLog.log or close blocked on a full disk"
        err = outcome["error"]
        assert err.errno == errno.ENOSPC and outcome["closed"]
        assert Path(err.filename).parent in (fs, fs / "tb"), err.filename
        # A resume on the still-full disk that must drop lines: it says so, and the
        # file is left whole (replaced, never truncated).
        before = (fs / "metrics.jsonl").read_text()
        if before:
            with pytest.raises(OSError) as again:
                runlog.RunLog(fs, total=10, initial=0, mode="off")
            assert again.value.errno == errno.ENOSPC
            assert (fs / "metrics.jsonl").read_text() == before


def test_an_unwritable_metrics_file_raises_an_oserror_naming_it(tmp_path, monkeypatch):
    """Everywhere (no root needed): a write that fails as a read-only file's does."""
    log = runlog.RunLog(tmp_path, total=3, initial=0, mode="off")
    file = log._jsonl

    class ReadOnly(io.TextIOWrapper):
        def write(self, text):
            raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(log, "_jsonl", ReadOnly(io.BytesIO()))
    with pytest.raises(OSError) as failed:
        log.log(1, {"loss": 1.0})
    assert failed.value.errno == errno.EROFS
    assert failed.value.filename == str(tmp_path / "metrics.jsonl")
    log.close()  # the earlier failure was raised: closing does not raise again
    file.close()


def test_a_damaged_line_is_kept_with_a_warning_and_only_a_torn_last_line_dropped(tmp_path):
    """A flipped bit in metrics.jsonl: a high bit makes a line invalid UTF-8, a low one
    can leave text that is no longer JSON. Resuming keeps both lines byte for byte
    (with a warning naming the file and line), drops the records after the
    checkpoint and the torn last line, and plot still reads the file."""
    from c4jax import plot

    lines = [json.dumps({"step": s, "loss": 0.5}).encode() for s in (1, 2, 3, 4, 5)]
    lines[1] = lines[1].replace(b"0.5", b"0\xae5")  # "." with its high bit: not UTF-8
    lines[2] = lines[2].replace(b'"step":', b'"step";')  # ":" with its low bit: not JSON
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"\n".join(lines) + b'\n{"step": 6, "lo')
    with pytest.warns(UserWarning) as caught:
        log = runlog.RunLog(tmp_path, total=9, initial=4, mode="off")
    assert [str(w.message) for w in caught] == [
        f"{path}: line {n} is not a JSON record (damaged?); kept as it is" for n in (2, 3)]
    log.log(5, {"loss": 0.25})
    log.close()
    written = path.read_bytes().split(b"\n")
    assert written[:4] == lines[:4] and json.loads(written[4]) == {"step": 5, "loss": 0.25}
    assert written[5:] == [b""]
    assert [r["step"] for r in plot.read_metrics(path) if "step" in r] == [1, 4, 5]


def test_a_progress_argument_is_a_mode_or_refused(monkeypatch):
    """``progress="verbose"`` (or 1) printed the status lines and no progress, silently."""
    monkeypatch.setattr(runlog, "default_mode", lambda: "lines")
    assert runlog.resolve_mode(True) == "lines"
    assert runlog.resolve_mode(False) == runlog.resolve_mode(None) == "off"
    assert [runlog.resolve_mode(m) for m in ("bar", "lines", "off")] == ["bar", "lines", "off"]
    for bad in ("verbose", 1, 0, "Bar"):
        with pytest.raises(ValueError, match="progress: got .*, allowed: True, False, 'bar'"):
            runlog.resolve_mode(bad)
