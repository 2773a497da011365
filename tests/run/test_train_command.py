"""The trainers' one command line (``c4jax.run.train_command``): the run-level flags in
``--help``, which trainer a command line picks, what ``--resume`` picks, a ``--workdir``
of someone else's files, and files that cannot be written (one line, exit 74). Nothing
here trains but the tests marked slow."""

import errno
import json
import os
import time
from pathlib import Path

import pytest

from c4jax import train
from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn import train as dqn_train
from c4jax.run import train_alphazero, train_command


@pytest.mark.parametrize("main, present, absent", [
    (train.main, ["--coordinator HOST:PORT", "--num-processes N", "--process-id I",
                  "--distributed, --no-distributed", "value-based: dqn/ddqn"], []),
    (dqn_train.main, [], ["--coordinator", "--distributed"]),
])
def test_help_lists_the_run_level_flags_as_options(main, present, absent, capsys,
                                                   monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as stop:
        main(["--config", "tiny", "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0
    for option in ["--config NAME|PATH", "--workdir DIR", "--resume", "--no-progress",
                   "--print-config", "--train.num-iterations", "Defaults below come from "
                   "preset tiny", *present]:
        assert option in out, option
    assert "--no-resume" not in out
    for option in absent:
        assert option not in out, option


# -- which trainer, which run -------------------------------------------------------------


def _run(runs: Path, name: str, config, age: float) -> Path:
    """A run directory holding only ``config``'s config.json, last written ``age`` s ago."""
    (runs / name).mkdir(parents=True)
    config_lib.save(config, runs / name / "config.json")
    stamp = time.time() - age
    os.utime(runs / name / "config.json", (stamp, stamp))
    return runs / name


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return Path("runs")


def test_resume_picks_the_newest_run_of_either_kind_and_says_which(runs):
    _run(runs, "az-old", config_lib.load("tiny"), 300)
    _run(runs, "dqn-new", dqn_config.load("tiny"), 100)
    _run(runs, "az-older", config_lib.load("tiny"), 200)
    call = train.parse_args(["--resume"])
    assert call.kind == "dqn" and call.workdir == runs / "dqn-new"
    assert call.config == dqn_config.load("tiny")
    picked = f"--resume: continuing {runs / 'dqn-new'}, the run in runs/ written to last"
    assert call.picked == picked
    assert call.source == f"the run directory's {runs / 'dqn-new' / 'config.json'}"
    # The value-based command line takes the newest value-based run.
    _run(runs, "az-newest", config_lib.load("tiny"), 0)
    assert train.parse_args(["--resume"]).workdir == runs / "az-newest"
    assert dqn_train.parse_args(["--resume"]).workdir == runs / "dqn-new"


def test_resume_overrides_and_explicit_workdir(runs):
    run = _run(runs, "a", config_lib.load("tiny"), 0)
    call = train.parse_args(["--resume", "--train.num-iterations", "9"])
    assert call.workdir == run and call.config.train.num_iterations == 9
    call = train.parse_args(["--resume", "--workdir", str(run)])
    assert call.workdir == run and call.picked is None  # nothing to pick


@pytest.mark.parametrize("main, needle", [
    (train.main, "--resume: no run directory with a config.json under runs/"),
    (dqn_train.main, "--resume: no value-based run directory with a config.json under runs/"),
])
def test_resume_without_a_run_is_one_error_line(main, needle, runs, error_line):
    if main is dqn_train.main:  # an AlphaZero run is no value-based one
        _run(runs, "az", config_lib.load("tiny"), 0)
    assert needle in error_line(main, ["--resume"])


def test_the_value_based_command_line_names_the_command_for_an_alphazero_run(runs, error_line):
    run = _run(runs, "az", config_lib.load("tiny"), 0)
    err = error_line(dqn_train.main, ["--workdir", str(run)])
    assert f"train it with python -m c4jax.train --workdir {run}" in err
    cpu = str(config_lib.PRESET_DIR / "cpu.json")
    err = error_line(dqn_train.main, ["--config", cpu, "--workdir", "x"])
    assert f"an AlphaZero config; train it with python -m c4jax.train --config {cpu}" in err


@pytest.mark.parametrize("name, kind", [
    ("tiny", "alphazero"), ("dqn/grogu", "dqn"), ("dqn/tiny", "dqn"),
    (str(config_lib.PRESET_DIR / "dqn" / "ddqn.json"), "dqn"),
    (str(config_lib.PRESET_DIR / "strong.json"), "alphazero"),
])
def test_the_configuration_picks_the_trainer(name, kind, tmp_path):
    call = train.parse_args(["--config", name, "--workdir", str(tmp_path)])
    assert call.kind == kind
    assert call.preset == (name if "/" not in name or name.startswith("dqn/") else None)


def test_a_run_s_config_json_marks_its_kind(tmp_path):
    config_lib.save(dqn_config.load("grogu"), tmp_path / "c.json")
    assert json.loads((tmp_path / "c.json").read_text())["algorithm"] == "dqn"
    call = train.parse_args(["--config", str(tmp_path / "c.json"), "--workdir", str(tmp_path)])
    assert call.kind == "dqn" and call.config == dqn_config.load("grogu")
    assert call.source == f"config file {tmp_path / 'c.json'}"


def test_an_unknown_config_lists_both_kinds_of_preset(tmp_path, error_line):
    err = error_line(train.main, ["--config", "grogu", "--workdir", str(tmp_path)])
    assert "presets: " + ", ".join(config_lib.preset_names()) in err
    assert "value-based: dqn/ddqn, dqn/grogu" in err
    err = error_line(dqn_train.main, ["--config", "cpu", "--workdir", str(tmp_path)])
    assert "presets: " + ", ".join(dqn_config.preset_names()) in err


def test_a_new_run_is_named_after_its_kind(runs):
    assert train.parse_args(["--config", "tiny"]).workdir.name[:1].isdigit()
    for call in (train.parse_args(["--config", "dqn/tiny"]), dqn_train.parse_args([])):
        assert call.workdir.parent == runs and call.workdir.name.startswith("dqn-")


# -- someone else's directory -------------------------------------------------------------


def _fake_training(monkeypatch, outcome):
    """Replaces AlphaZero's training by ``outcome(config, workdir)`` (a summary, or raises);
    returns the list of the work directories it was called with."""
    calls = []

    def train_and_evaluate(config, workdir, *, progress):
        calls.append(Path(workdir))
        return outcome(config, workdir)

    monkeypatch.setattr(train_alphazero, "train_and_evaluate", train_and_evaluate)
    return calls


_DONE = {"interrupted": False, "done": 0, "step": 4, "eval": {}}


def test_a_workdir_of_someone_else_s_files_is_refused_unless_forced(tmp_path, error_line,
                                                                    monkeypatch, capsys):
    theirs = {"config.json": '{"learning_rate": 0.1}\n', "metrics.jsonl": '{"epoch": 1}\n'}
    for name, text in theirs.items():
        (tmp_path / name).write_text(text)
    calls = _fake_training(monkeypatch, lambda config, workdir: _DONE)
    for argv in (["--workdir", str(tmp_path)], ["--config", "tiny", "--workdir", str(tmp_path)]):
        err = error_line(train.main, argv)
        assert f"--workdir {tmp_path}: not a c4jax run directory (its config.json is not a " \
               "c4jax configuration: no train section)" in err and "--force-workdir" in err
    assert not calls
    assert {name: (tmp_path / name).read_text() for name in theirs} == theirs
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(theirs)  # not even a lock
    assert train.main(["--config", "tiny", "--workdir", str(tmp_path), "--force-workdir"]) == 0
    assert calls == [tmp_path]
    capsys.readouterr()


def test_force_workdir_is_listed_in_help(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        dqn_train.main(["--help"])
    assert "--force-workdir" in capsys.readouterr().out


# -- files that cannot be written -----------------------------------------------------------


def _io_error_line(capsys, main, argv) -> str:
    """``main(argv)`` must exit 74 with one ``error:`` line and no traceback."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == train_command.EXIT_IO == 74, err
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_a_full_disk_while_writing_config_json_is_one_error_line(tmp_path, monkeypatch, capsys):
    """The real trainer up to its first write, which fails as on a full disk."""
    from c4jax.run import rundir

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(rundir, "write_atomic", full)
    line = _io_error_line(capsys, train.main, ["--config", "tiny", "--workdir", str(tmp_path)])
    assert line == (
        f"error: cannot write {tmp_path / 'config.json'} (No space left on device); no "
        "checkpoint was saved. Free some space there (or raise the quota), then continue "
        f"with: python -m c4jax.train --workdir {tmp_path}"
    )


@pytest.mark.parametrize("code, fix", [(errno.EACCES, "Make it writable"),
                                       (errno.EIO, "Check the disk"),
                                       (errno.EDQUOT, "Free some space")])
def test_an_unwritable_file_raised_anywhere_is_one_error_line(code, fix, tmp_path, monkeypatch,
                                                              capsys):
    """However deep the OSError (Orbax re-raises it from its own errors), one line."""
    config_lib.save(config_lib.load("tiny"), tmp_path / "config.json")  # a run, saved to 6
    (tmp_path / "checkpoints" / "6").mkdir(parents=True)
    (tmp_path / "checkpoints" / "8.orbax-checkpoint-tmp-1").mkdir()
    events = tmp_path / "tb" / "events.out.tfevents.1"

    def fail(config, workdir):
        try:
            raise OSError(code, os.strerror(code), str(events))
        except OSError as err:
            raise RuntimeError("Save Finalize thread failed") from err

    _fake_training(monkeypatch, fail)
    line = _io_error_line(capsys, train.main, ["--workdir", str(tmp_path)])
    assert line.startswith(f"error: cannot write {events} ({os.strerror(code)}); checkpoint 6 "
                           f"is the newest saved. {fix}")


def test_other_errors_are_not_taken_for_a_full_disk(tmp_path, monkeypatch):
    def fail(config, workdir):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "x")

    _fake_training(monkeypatch, fail)
    with pytest.raises(FileNotFoundError):
        train.main(["--config", "tiny", "--workdir", str(tmp_path)])


@pytest.mark.parametrize("summary, code", [({}, 130), ({"exit_code": 143}, 143)])
def test_a_stopped_run_exits_with_the_code_of_what_stopped_it(summary, code, tmp_path,
                                                              monkeypatch):
    _fake_training(monkeypatch, lambda config, workdir: {**_DONE, "interrupted": True,
                                                         **summary})
    assert train.main(["--config", "tiny", "--workdir", str(tmp_path)]) == code
