"""bench/bench_leaves.py: batched leaves against mctx's, alternated in one process."""

import json

import pytest

from bench import bench_leaves


def test_summary_ratios_are_mctx_over_batched():
    times = {"batched self-play": [1.0, 2.0, 3.0], "mctx self-play": [1.5, 2.0, 6.0],
             "batched sgd": [1.0, 1.0, 1.0], "mctx sgd": [1.0, 1.1, 0.9]}
    summary = bench_leaves.summarize(times, positions=100)
    assert summary["batched"]["selfplay_s"] == 2.0 and summary["mctx"]["selfplay_s"] == 2.0
    assert summary["batched"]["selfplay_positions_per_s"] == 50.0
    assert summary["selfplay_speedup"]["medians"] == 1.0
    assert summary["selfplay_speedup"]["paired_median"] == 1.5  # of 1.5, 1.0, 2.0
    assert summary["sgd_speedup"]["paired_median"] == 1.0


def test_rejects_no_repeats(usage_error):
    assert "--repeats" in usage_error(bench_leaves.parse_args, ["--repeats", "0"])


@pytest.mark.slow
def test_times_both_variants_of_the_tiny_preset(tmp_path, capsys):
    out = tmp_path / "r.json"
    record = bench_leaves.main(["--config", "tiny", "--repeats", "2", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(record))
    for label in ("batched self-play", "mctx self-play", "batched sgd", "mctx sgd"):
        assert len(record["times_s"][label]) == 2 and min(record["times_s"][label]) > 0
    assert record["settings"]["simulations"] == 4 and record["summary"]["selfplay_speedup"]
    assert record["command"].startswith("python -m bench.bench_leaves --config tiny")
    assert "mctx / batched" in capsys.readouterr().out
