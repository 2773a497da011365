"""bench/scaling.py: the rows it measures, the efficiencies, the table, its errors,
and one timed iteration of the tiny preset (the worker's measurement)."""

import math

import pytest

from bench import scaling
from c4jax.alphazero import config as config_lib


def test_the_plan_has_weak_strong_and_two_process_rows():
    rows = scaling.plan([1, 2, 4], per_device=64, global_batch=256, processes=True)
    assert [(r.kind, r.total_devices, r.batch) for r in rows] == [
        ("weak", 1, 64), ("weak", 2, 128), ("weak", 4, 256),
        ("strong", 1, 256), ("strong", 2, 256), ("strong", 4, 256),
        ("weak", 2, 128), ("strong", 2, 256),
    ]
    assert [r.processes for r in rows[-2:]] == [2, 2]
    assert not any(r.processes > 1 for r in scaling.plan([1, 2], 64, 256, processes=False))


def test_efficiency_is_against_n_times_one_device():
    assert scaling.efficiency(300.0, 4, 100.0) == pytest.approx(0.75)
    assert scaling.efficiency(80.0, 4, 100.0) == pytest.approx(0.2)


def test_finish_and_table_report_each_row_against_its_own_one_device_rate():
    rows = scaling.plan([1, 2], per_device=8, global_batch=16, processes=True)
    rates = [100.0, 150.0, 200.0, 180.0, 140.0, 120.0]
    measured = [{"seconds": 1.0, "positions_per_second": r, "compile_s": 2.0} for r in rates]
    results = scaling.finish(rows, measured)
    weak2, strong2, weak_mp, strong_mp = results[1], results[3], results[4], results[5]
    assert weak2["efficiency"] == pytest.approx(0.75)  # 150 / (2 x 100)
    assert strong2["efficiency"] == pytest.approx(0.45)  # 180 / (2 x 200)
    assert weak_mp["efficiency"] == pytest.approx(0.7) and weak_mp["processes"] == 2
    assert strong_mp["efficiency"] == pytest.approx(0.3)
    text = scaling.table(results)
    assert "| weak | 2 x 1 | 16 | 1.00 | 140 | 1.40x | 70% |" in text
    assert "| strong | 1 x 2 | 16 | 1.00 | 180 | 0.90x | 45% |" in text


@pytest.mark.parametrize("argv, message", [
    (["--devices", "2,4"], "including 1"),
    (["--devices", "1,x"], "comma-separated integers"),
    (["--devices", "1,3", "--global-batch", "256"], "does not divide"),
    (["--repeats", "0"], "--repeats"),
    (["--warmup", "0"], "--warmup: must be >= 1"),  # the compile would be timed
    # The 2-process rows put an odd global batch on 2 devices.
    (["--devices", "1", "--global-batch", "255"], "does not divide by device counts [2]"),
])
def test_bad_arguments_are_rejected_naming_the_flag(argv, message, usage_error):
    assert message in usage_error(scaling.parse_args, argv)


def test_measure_times_iterations_after_the_compiling_one():
    config = config_lib.load("tiny")
    result = scaling.measure(config, warmup=1, repeats=2)
    assert len(result["all_seconds"]) == 2 and result["compile_s"] > 0
    t = config.train
    assert result["positions_per_second"] == pytest.approx(
        t.selfplay_batch * t.selfplay_steps / result["seconds"])
    assert math.isfinite(result["sgd_samples_per_second"])


def test_row_config_sets_the_batch_and_the_bench_length():
    args = scaling.parse_args(["--config", "tiny", "--selfplay-steps", "3", "--sgd-steps", "2"])
    config = scaling.row_config(args, 48)
    t = config.train
    assert (t.selfplay_batch, t.minibatch_size, t.selfplay_steps, t.sgd_steps) == (48, 48, 3, 2)
    config_lib.validate(config, 2)


def test_a_worker_runs_the_flags_of_the_caller_and_of_training(monkeypatch):
    """Each row's process had XLA_FLAGS set to the device count alone: the caller's
    flags were dropped, and it timed XLA's default CPU path, not the YNNPACK fusion
    that python -m c4jax.train turns on."""
    monkeypatch.setattr(scaling.xla_flags, "jaxlib_knows", lambda name: True)
    monkeypatch.delenv(scaling.xla_flags.OPT_OUT, raising=False)
    flags = scaling.worker_xla_flags(
        "--xla_cpu_foo=1 --xla_force_host_platform_device_count=8", 2).split()
    assert flags[:2] == ["--xla_cpu_foo=1", "--xla_force_host_platform_device_count=2"]
    assert flags[2:] == [scaling.xla_flags.YNN_FLAG]
    monkeypatch.setenv(scaling.xla_flags.OPT_OUT, "0")  # the user's opt-out holds
    assert scaling.worker_xla_flags("", 4) == "--xla_force_host_platform_device_count=4"


def test_a_config_that_does_not_load_is_one_line_before_any_row(tmp_path, capsys):
    assert scaling.main(["--config", "nosuch", "--devices", "1", "--no-processes",
                         "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nosuch" in err and err.count("\n") == 1
    assert not (tmp_path / "s.json").exists()
