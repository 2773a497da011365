"""The run's log: metrics.jsonl, TensorBoard files readable by TensorBoard, and
progress as plain lines with an ETA that ignores the compiling iteration."""

import json

import pytest

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
