"""PNG plots of metrics.jsonl."""

import json
import re

import pytest
from faults import fill, small_fs  # a real tmpfs: read-only, or full

from c4jax import plot
from c4jax.store import outputs

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
            "seconds": 30.0,
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


def test_a_record_whose_step_is_not_a_number_is_skipped(tmp_path, capsys):
    """A hand-edited ``"step": null`` was a TypeError traceback (exit 1)."""
    assert plot.series([{"step": None, "loss": 0.5}, {"step": "abc", "loss": 0.4},
                        {"step": 3, "loss": 0.3}, {"loss": 0.2}], "loss") == (
        [3.0, 4.0], [0.3, 0.2])
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": null, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n')
    assert plot.main([str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out


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
    figs = plot.figures(plot.read_metrics(tiny_run / "metrics.jsonl"))
    (_, top), = _top_axes(figs["losses"])
    assert top is not None, "the tiny run logs its iterations' seconds: a wall-clock axis"


def _records(with_time: bool = True):
    path_records = []
    for step in range(1, 13):
        record = {"step": step, "loss": 3.0 / step, "policy_loss": 2.0 / step,
                  "value_loss": 1.0 / step, "policy_entropy": 1.9 - 0.05 * step,
                  "game_length": 10.0 + step, "first_player_win_rate": 0.6,
                  "draw_rate": 0.01 * step}
        if with_time:
            record["seconds"] = 90.0 if step == 1 else 30.0  # the first compiles
        if step % 4 == 0:
            record.update({"win_rate/random": 0.5 + 0.04 * step, "score": 0.88,
                           "score/random": 0.6, "mistake/L1_R3": 0.4 - 0.02 * step,
                           "mistake/L2_R2": 0.3, "mistake_nontrivial/L1_R3": 0.6,
                           "mistake_rate": 0.35})
        path_records.append(record)
    return path_records


def _texts(fig) -> dict[str, list[str]]:
    """The words a reader sees: titles, axis labels (twins and top axes too), legend entries."""
    texts = {"titles": [], "labels": [], "legend": []}
    for ax in fig.axes:
        texts["titles"].append(ax.get_title())
        for child in [ax, *ax.child_axes]:
            texts["labels"] += [child.get_xlabel(), child.get_ylabel()]
        if ax.get_legend() is not None:
            texts["legend"] += [t.get_text() for t in ax.get_legend().get_texts()]
    return {k: [t for t in v if t] for k, v in texts.items()}


def test_plots_speak_words_not_metric_keys():
    records = _records()
    figs = plot.figures(records, "run")
    keys = {k for r in records for k in r if "/" in k or "_" in k}  # not words
    for stem, fig in figs.items():
        texts = _texts(fig)
        shown = texts["titles"] + texts["labels"] + texts["legend"]
        assert not keys & set(shown), (stem, keys & set(shown))
        for text in shown:
            assert not re.search(r"\b(win_rate|mistake_nontrivial|mistake|score)/", text), text
            assert "_rate" not in text and "_loss" not in text and "policy_entropy" not in text
    texts = _texts(figs["win_rates"])
    assert "wins against random" in texts["legend"]
    assert "checkpoint score (100 - mean mistake rate)" in texts["legend"]
    assert "win rate, score (%)" in texts["labels"]
    texts = _texts(figs["mistake_rates"])
    assert texts["legend"] == ["L1_R3 (beginning, hard)", "L2_R2 (middle, medium)",
                               "mean over the sets"]
    assert "mistake rate (%)" in texts["labels"]
    assert "training iteration" in texts["labels"]
    texts = _texts(figs["selfplay"])
    assert {"first player (x) wins", "draws"} <= set(texts["legend"])
    assert "game length (plies)" in texts["labels"]
    assert texts["titles"][0] == "Self-play games"
    assert plot.label("score") == "checkpoint score (mean match score)"
    assert plot.label("score/lookahead") == "score against lookahead (wins + draws / 2)"
    assert plot.label("mistake/L1_R3") == "L1_R3 (beginning, hard)"
    assert plot.label("something_new") == "something_new"  # an unknown metric keeps its key


def test_rates_are_plotted_in_percent():
    records = _records()
    figs = plot.figures(records)
    by_label = {
        line.get_label(): line.get_ydata()
        for stem, fig in figs.items() if stem not in ("overview", "mistake_rates_nontrivial")
        for ax in fig.axes for line in ax.get_lines()
    }
    assert max(by_label["wins against random"]) == pytest.approx(100 * (0.5 + 0.04 * 12))
    assert max(by_label["L1_R3 (beginning, hard)"]) == pytest.approx(100 * (0.4 - 0.02 * 4))
    assert max(by_label["L2_R2 (middle, medium)"]) == pytest.approx(30.0)
    assert max(by_label["draws"]) == pytest.approx(12.0)
    assert max(by_label["first player (x) wins"]) == pytest.approx(60.0)
    assert max(by_label["checkpoint score (100 - mean mistake rate)"]) == pytest.approx(88.0)
    assert max(by_label["total loss"]) == pytest.approx(3.0)  # not a rate: as logged
    nontrivial = figs["mistake_rates_nontrivial"].axes[0].get_lines()[0]
    assert nontrivial.get_label() == "L1_R3 (beginning, hard)"
    assert max(nontrivial.get_ydata()) == pytest.approx(60.0)
    assert max(by_label["game length (plies, right axis)"]) == pytest.approx(22.0)


def test_no_legend_hides_a_curve():
    for stem, fig in plot.figures(_records(), "run").items():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert legends or stem == "policy_entropy", stem  # one named curve needs none
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                for line in ax.get_lines():
                    xy = line.get_xydata()
                    points = ax.transData.transform(xy)
                    assert not any(box.contains(x, y) for x, y in points), (
                        stem, line.get_label(), legend.get_texts()[0].get_text()
                    )
                    # The curve's end in particular: inside the figure, not under a legend.
                    x, y = points[-1]
                    assert fig.bbox.contains(x, y) and not box.contains(x, y)
            # The legend is inside the figure, not cut off by its edge.
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 + 1, (stem, box)
            assert box.y0 >= fig.bbox.y0 and box.y1 <= fig.bbox.y1 + 1, (stem, box)


def _top_axes(fig):
    """(the iterations axis, its top axis of training time or None) of each panel."""
    pairs = []
    for ax in fig.axes:
        if ax.get_xlabel() != "training iteration":
            continue  # a twin y axis
        tops = [a for a in ax.child_axes if a.get_xlabel().startswith("training time")]
        assert len(tops) <= 1
        pairs.append((ax, tops[0] if tops else None))
    return pairs


def test_a_wall_clock_axis_from_the_logged_iteration_times():
    records = _records()
    steps, minutes = plot.elapsed_minutes(records)
    assert steps[:3] == [0.0, 1.0, 2.0] and steps[-1] == 12.0
    assert minutes[:3] == pytest.approx([0.0, 1.5, 2.0])
    assert minutes[-1] == pytest.approx((90 + 11 * 30) / 60)
    by_step = dict(zip(steps, minutes, strict=True))
    for stem, fig in plot.figures(records, "run").items():
        fig.canvas.draw()
        for ax, top in _top_axes(fig):
            assert top is not None, stem
            assert top.get_xlabel() == plot.TIME_LABEL.format(unit="minutes")
            # Over each iteration tick, the training time by the end of that iteration.
            ticks = list(ax.get_xticks())
            assert list(top.get_xticks()) == ticks, stem
            labels = [t.get_text() for t in top.get_xticklabels()]
            shown = {tick: text for tick, text in zip(ticks, labels, strict=True) if text}
            assert len(shown) >= 3, (stem, shown)
            for tick, text in shown.items():
                assert tick == int(tick) and float(text) == pytest.approx(by_step[tick], abs=0.05)
            assert shown.get(12.0, "7.0") == "7.0"
            for tick, text in zip(ticks, labels, strict=True):
                if not 0 <= tick <= 12:
                    assert text == "", (stem, tick)  # no time shown where none was logged

    # A run under 3 minutes shows seconds; one that logged no times has no such axis.
    short = [{**r, "seconds": 2.0} for r in records]
    fig = plot.figures(short)["losses"]
    fig.canvas.draw()
    (ax, top), = _top_axes(fig)
    assert top.get_xlabel() == plot.TIME_LABEL.format(unit="seconds")
    labels = dict(zip(ax.get_xticks(), [t.get_text() for t in top.get_xticklabels()],
                      strict=True))
    assert labels[12.0] == "24" and labels[2.0] == "4.0"
    assert plot.elapsed_minutes(_records(with_time=False)) == ([], [])
    fig = plot.figures(_records(with_time=False))["losses"]
    assert _top_axes(fig) == [(fig.axes[0], None)]


def test_plot_bad_input_exits_2(tmp_path, capsys):
    assert plot.main([str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text("")
    assert plot.main([str(tmp_path)]) == 2
    assert "no metrics" in capsys.readouterr().err


# --- Output folders that cannot be written, and a full disk. ---


def _plot_main(argv, capsys):
    code = plot.main(argv)
    return code, capsys.readouterr().err


def test_an_output_folder_that_is_a_file_or_under_one_is_one_error_line(tmp_path, capsys):
    _write_metrics(tmp_path / "metrics.jsonl", with_mistakes=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    for out in (blocker, blocker / "plots"):
        code, err = _plot_main([str(tmp_path), "--out", str(out)], capsys)
        assert code == 2 and err.startswith("error: --out: cannot write ") and "is a file" in err
        assert err.count("\n") == 1, err
    assert blocker.read_text() == "mine"


def test_a_read_only_output_folder_is_one_error_line_before_drawing(tmp_path, capsys):
    _write_metrics(tmp_path / "metrics.jsonl", with_mistakes=False)
    with small_fs(tmp_path / "ro", "64k", read_only=True) as ro:
        code, err = _plot_main([str(tmp_path), "--out", str(ro / "plots")], capsys)
    assert code == 2, err
    assert err == f"error: --out: cannot write {str(ro / 'plots')!r}: a read-only file system;" \
        " give a path on a writable one\n"


def test_a_full_disk_is_exit_74_and_leaves_no_partial_png(tmp_path, capsys):
    _write_metrics(tmp_path / "metrics.jsonl", with_mistakes=True)
    with small_fs(tmp_path / "full", "256k") as disk:
        fill(disk)
        code, err = _plot_main([str(tmp_path), "--out", str(disk)], capsys)
        left = sorted(p.name for p in disk.iterdir())
    assert code == outputs.EXIT_IO == 74, err
    assert err.startswith(f"error: --out: cannot write {str(disk)!r}: No space left on device")
    assert "free some space" in err and err.count("\n") == 1
    assert left == ["filler"]  # no PNG, no temporary file


def test_plots_fill_the_disk_midway_and_leave_no_partial_file(tmp_path, capsys):
    """Room for the probe but not for every PNG: the write that fails leaves nothing
    half-written (each PNG is whole or absent), exit 74."""
    _write_metrics(tmp_path / "metrics.jsonl", with_mistakes=True)
    with small_fs(tmp_path / "small", "160k") as disk:  # 3 of the 7 PNGs (36-214 KB) fit
        code, err = _plot_main([str(tmp_path), "--out", str(disk)], capsys)
        pngs = {p.name: p.read_bytes() for p in disk.iterdir()}
    assert code == 74, err
    assert "No space left on device" in err and err.count("\n") == 1
    assert ".png': No space left on device" in err and 1 <= len(pngs) < 7, (err, list(pngs))
    assert not [name for name in pngs if not name.endswith(".png")], pngs  # no .tmp left
    assert all(data.startswith(PNG) and data.rstrip(b"\0").endswith(b"IEND\xaeB`\x82")
               for data in pngs.values())
