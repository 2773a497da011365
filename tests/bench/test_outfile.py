"""bench/outfile.py: a benchmark's output path is refused when the command line is read,
and its results are written whole, or printed when they cannot be."""

from __future__ import annotations

import argparse
import json
import os

import pytest
from faults import fill, small_fs  # a real tmpfs, full

from bench import devset, outfile, simulations, time_to_strength


def _parser(*suffixes: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.x")
    parser.add_argument("--out", type=outfile.path_arg("--out", *suffixes))
    return parser


def test_a_folder_or_a_path_below_a_file_is_refused_by_argparse(tmp_path, usage_error):
    err = usage_error(_parser().parse_args, ["--out", str(tmp_path)])
    assert err.count("error: ") == 1 and "argument --out: cannot write" not in err
    assert f"argument --out: '{tmp_path}' is a folder; give a file path" in err
    (tmp_path / "file").write_text("")
    err = usage_error(_parser().parse_args, ["--out", str(tmp_path / "file" / "r.json")])
    assert "argument --out: cannot write" in err
    assert os.listdir(tmp_path) == ["file"]  # the check leaves nothing behind
    assert _parser().parse_args(["--out", str(tmp_path / "new" / "r.json")]).out == (
        tmp_path / "new" / "r.json")
    assert not (tmp_path / "new").exists()


def test_a_path_without_suffix_checks_each_file_written(tmp_path, usage_error):
    (tmp_path / "sweep.png").mkdir()  # OUT.json can be written, OUT.png cannot
    err = usage_error(_parser(".json", ".png").parse_args, ["--out", str(tmp_path / "sweep")])
    assert "sweep.png' is a folder" in err


@pytest.mark.parametrize("module, argv", [
    (devset, ["--num", "1"]),
    (simulations, ["--sims", "0"]),
    (time_to_strength, ["--config", "tiny", "--workdir", "w"]),
], ids=["devset", "simulations", "time_to_strength"])
def test_the_commands_refuse_a_bad_out_before_any_work(module, argv, tmp_path, capsys):
    """``bench.devset --out FOLDER`` ended in an IsADirectoryError traceback after
    its work; time_to_strength's and simulations' after hours of it."""
    (tmp_path / "x.json").mkdir()
    main = module.main
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(tmp_path / ("x.json" if module is devset else "x"))])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --out: " in err and "x.json' is a folder" in err


def test_write_json_replaces_the_file_whole(tmp_path):
    path = tmp_path / "sub" / "r.json"
    outfile.write_json(path, {"a": 1.5}, name="--out")
    assert json.loads(path.read_text()) == {"a": 1.5}
    outfile.write_json(path, [{"x": 1}, {"x": 2}], name="--out", lines=True)
    assert path.read_text() == '{"x": 1}\n{"x": 2}\n'
    assert sorted(os.listdir(path.parent)) == ["r.json"]


def test_results_that_cannot_be_written_are_printed_not_lost(tmp_path, capsys):
    with small_fs(tmp_path / "fs", "64k") as disk:
        fill(disk)
        with pytest.raises(SystemExit) as exit_info:
            outfile.write_json(disk / "r.json", {"speed": 1037.5}, name="--out")
        assert not (disk / "r.json").exists()
    out, err = capsys.readouterr()
    assert json.loads(out) == {"speed": 1037.5}
    assert exit_info.value.code == 74 and err.startswith("error: --out: cannot write")
    assert "the results are printed above" in err
