"""PNG plots of metrics.jsonl."""

import json

import pytest

from c4jax import plot

PNG = b"\x89PNG\r\n\x1a\n"


def _write_metrics(path, with_mistakes: bool):
    lines = []
    for step in range(1, 13):
        record = {
            "step": step,
            "loss": 3.0 / step,
            "policy_loss": 2.0 / step,
            "value_loss": 1.0 / step,
            "policy_entropy": 1.9 - 0.05 * step,
            "game_length": 10.0 + step,
            "first_player_win_rate": 0.6,
            "draw_rate": 0.01 * step,
        }
        if step % 4 == 0:
            record.update({"win_rate/random": 0.5 + 0.04 * step, "score": 0.5})
            if with_mistakes:
                record.update({"mistake/L1_R1": 0.4 - 0.02 * step, "mistake/L2_R2": 0.3})
                record.update({"mistake_nontrivial/L1_R1": 0.6, "mistake_rate": 0.35})
        lines.append(json.dumps(record))
    lines.append('{"step": 13, "loss": 0.')  # a line still being written
    path.write_text("\n".join(lines))


def test_plot_writes_pngs_for_present_metrics(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _write_metrics(run / "metrics.jsonl", with_mistakes=True)
    out = tmp_path / "plots"
    assert plot.main([str(run), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert names == {
        "losses.png",
        "policy_entropy.png",
        "win_rates.png",
        "mistake_rates.png",
        "mistake_rates_nontrivial.png",
        "selfplay.png",
        "overview.png",
    }
    for path in out.iterdir():
        assert path.read_bytes()[:8] == PNG
    printed = capsys.readouterr().out
    assert "wrote 7 plots" in printed and str(out / "losses.png") in printed


def test_plot_skips_absent_metrics_and_defaults_to_run_plots(tmp_path):
    _write_metrics(tmp_path / "metrics.jsonl", with_mistakes=False)
    written = plot.plot_run(tmp_path)
    assert all(p.parent == tmp_path / "plots" for p in written)
    assert not {"mistake_rates.png", "mistake_rates_nontrivial.png"} & {p.name for p in written}
    assert "losses.png" in {p.name for p in written}


@pytest.mark.slow
def test_plot_of_the_tiny_run(tiny_run, tmp_path):
    written = plot.plot_run(tiny_run, tmp_path)
    assert {"losses.png", "win_rates.png", "overview.png"} <= {p.name for p in written}


def test_plot_bad_input_exits_2(tmp_path, capsys):
    assert plot.main([str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text("")
    assert plot.main([str(tmp_path)]) == 2
    assert "no metrics" in capsys.readouterr().err
