"""The trainers' one command line (``c4jax.run.train_command``): the run-level flags in
``--help``, which trainer a command line picks, what ``--resume`` picks, a ``--workdir``
of someone else's files, and files that cannot be written (one line, exit 74). Nothing
here trains but the tests marked slow."""

import contextlib
import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from commands import run_main
from faults import small_fs  # a real tmpfs: read-only, or full

from c4jax import train
from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn import train as dqn_train
from c4jax.run import rundir, train_alphazero, train_command


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


def test_an_exported_network_is_no_workdir_and_is_left_as_it_was(tmp_path, error_line,
                                                                 monkeypatch, capsys):
    from c4jax.store import exported

    net = tmp_path / "net"
    shutil.copytree(exported.PRETRAINED_DIR, net)  # the shipped agent's folder
    before = {p.name: p.read_bytes() for p in net.iterdir()}
    calls = _fake_training(monkeypatch, lambda config, workdir: _DONE)
    for argv in (["--workdir", str(net)], ["--config", "tiny", "--workdir", str(net)]):
        err = error_line(train.main, argv)
        assert f"--workdir {net}: an exported network (variables.msgpack), not a run " \
               "directory" in err and "--force-workdir" in err
    assert not calls
    assert {p.name: p.read_bytes() for p in net.iterdir()} == before  # not even a lock
    exported.load_exported(net)  # its checksums still hold
    assert train.main(["--config", "tiny", "--workdir", str(net), "--force-workdir"]) == 0
    assert calls == [net]
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
                                       (errno.EBUSY, "Make it writable"),
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


# -- real faults on a real run --------------------------------------------------------------


def _train_cli(*args, timeout=400):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-m", "c4jax.train", "--no-progress", *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


def _one_io_error(done) -> str:
    """The one ``error:`` line of a trainer that stopped on an unwritable file (exit 74)."""
    assert done.returncode == 74, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-3000:]
    return lines[0]


@pytest.mark.slow
def test_a_full_disk_stops_with_one_line_and_the_run_continues_once_there_is_room(tmp_path,
                                                                                  capsys):
    """A real 1.5 MB tmpfs fills up during a tiny run: before, the trainer hung for good
    (TensorBoard's writer thread died and the log waited on its queue) or printed ~90
    lines of tracebacks with exit 2."""
    with small_fs(tmp_path / "fs", "1500k") as fs:
        run = fs / "run"
        hint = f"then continue with: python -m c4jax.train --workdir {run}"
        line = _one_io_error(_train_cli("--config", "tiny", "--workdir", str(run),
                                        "--train.num-iterations", "40"))
        assert "(No space left on device)" in line and line.endswith(hint), line
        steps = rundir.saved_steps(run)
        assert steps and f"checkpoint {steps[-1]} is the newest saved" in line
        # Only whole checkpoints are left (compared as numbers: "10" sorts before "8").
        left = [p.name for p in (run / "checkpoints").iterdir()]
        assert all(name.isdecimal() for name in left), left
        assert sorted(map(int, left)) == steps
        # Resuming on the disk still full (to the last byte): the same line, at once.
        filler = open(fs / "filler", "wb")  # noqa: SIM115 - closing it fails too
        with contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        with contextlib.suppress(OSError):
            filler.close()
        kept = (run / "metrics.jsonl").read_text()
        line = _one_io_error(_train_cli("--workdir", str(run)))
        assert "(No space left on device)" in line and line.endswith(hint), line
        assert f"checkpoint {steps[-1]} is the newest saved" in line
        assert (run / "metrics.jsonl").read_text() == kept  # never truncated
        # Room again: the run continues from its newest checkpoint and logs each step once.
        (fs / "filler").unlink()
        subprocess.run(["mount", "-o", "remount,size=64m", str(fs)], check=True)
        # (In this process: the processes above already showed the command line's exits.)
        code, _, err = run_main(train.main, ["--no-progress", "--workdir", str(run)], capsys)
        assert code == 0, err[-3000:]
        logged = [json.loads(line)["step"] for line in (run / "metrics.jsonl").open()]
        assert logged == list(range(1, 41))


@contextlib.contextmanager
def _read_only(path):
    """``path`` made read-only as a real file system does it: a read-only bind mount as
    root (permission bits do not stop root), else its mode."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        yield "Permission denied"
        return
    bound = subprocess.run(f"mount --bind {path} {path} && mount -o remount,ro,bind {path}",
                           shell=True, capture_output=True, text=True)
    if bound.returncode:
        subprocess.run(["umount", str(path)], check=False, capture_output=True)
        pytest.skip(f"cannot bind-mount a file read-only: {bound.stderr.strip()}")
    try:
        yield "Read-only file system"
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_a_read_only_metrics_file_is_one_error_line_on_resume(tiny_run_copy, capsys):
    run, _ = tiny_run_copy
    with _read_only(run / "metrics.jsonl") as reason:
        line = _io_error_line(capsys, train.main, ["--workdir", str(run),
                                                   "--train.num-iterations", "6"])
    assert line.startswith(f"error: cannot write {run / 'metrics.jsonl'} ({reason}); "
                           "checkpoint 4 is the newest saved. Make it writable, then continue "
                           f"with: python -m c4jax.train --workdir {run}")


def test_an_edited_config_json_names_the_fields_and_the_command_that_continues(tiny_run_copy,
                                                                               capsys):
    run, _ = tiny_run_copy
    edited = json.loads((run / "config.json").read_text())
    edited["network"]["channels"] = 16
    edited["train"]["optimizer"] = "sgd"
    (run / "config.json").write_text(json.dumps(edited))
    code = train.main(["--workdir", str(run)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    fix = (f"python -m c4jax.train --workdir {run} --network.channels 8 "
           "--train.optimizer adamw")
    assert err == (
        f"error: {run / 'config.json'} says network.channels 16, train.optimizer 'sgd', but "
        f"the checkpoints in {run / 'checkpoints'} were trained with network.channels 8, "
        "train.optimizer 'adamw' (config.json was edited since); a run cannot change these "
        "when it continues. Continue with the checkpoints' values (config.json takes them "
        f"again once it trains): {fix}; or train the new values in a new --workdir\n"
    )
    assert "drop those overrides" not in err
    assert train.main(fix.split()[3:]) == 0  # the offered command is accepted
    assert "nothing to do" in capsys.readouterr().out
    # Changes on the command line keep their own message.
    code = train.main(["--workdir", str(run), "--network.channels", "32"])
    assert code == 2 and "drop those overrides" in capsys.readouterr().err


def test_the_command_offered_for_an_edited_switch_sets_it_as_the_command_line_takes_it(
        tiny_run_copy, capsys):
    run, _ = tiny_run_copy
    edited = json.loads((run / "config.json").read_text())
    edited["network"]["opponent_head"] = True  # a switch: a flag pair taking no value
    (run / "config.json").write_text(json.dumps(edited))
    assert train.main(["--workdir", str(run)]) == 2
    err = capsys.readouterr().err
    fix = f"python -m c4jax.train --workdir {run} --network.no-opponent-head"
    assert f"once it trains): {fix}; or train" in err, err
    assert train.main(fix.split()[3:]) == 0  # the offered command is accepted
    assert "nothing to do" in capsys.readouterr().out


def test_orbax_s_error_logs_are_held_and_shown_unless_reported_in_one_line(caplog):
    logger = logging.getLogger("absl")
    with caplog.at_level(logging.WARNING, logger="absl"):
        with train_command.held_errors() as held:
            logger.error("Save Finalize thread failed")
            logger.warning("a warning passes")
            assert [r.getMessage() for r in caplog.records] == ["a warning passes"]
        assert [r.getMessage() for r in caplog.records][-1] == "Save Finalize thread failed"
        caplog.clear()
        with train_command.held_errors() as held:
            logger.error("Save Finalize thread failed")
            held.clear()  # the failure was said in one line
        assert caplog.records == []


def test_a_run_of_several_processes_needs_a_workdir(error_line, monkeypatch):
    """Each process would name its own folder from its own clock."""
    calls = _fake_training(monkeypatch, lambda config, workdir: _DONE)
    for cluster in (["--coordinator", "127.0.0.1:9", "--num-processes", "2",
                     "--process-id", "1"], ["--distributed"]):
        err = error_line(train.main, ["--config", "tiny", *cluster])
        assert err.startswith("error: --workdir: a run of several processes needs one"), err
    assert not calls


def test_the_commands_that_continue_quote_the_workdir(tmp_path):
    from c4jax.run import train_dqn

    spaced = tmp_path / "my runs" / "a b"
    assert train_alphazero._resume_hint(spaced).endswith(f"--workdir '{spaced}'")
    assert train_dqn._resume_hint(spaced).endswith(f"--workdir '{spaced}'")


def test_the_device_out_of_memory_is_one_line_not_lost_contact(tmp_path, monkeypatch, capsys):
    import jax

    oom = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes."
    assert not train_command.peer_failure(jax.errors.JaxRuntimeError(oom))
    assert train_command.peer_failure(
        jax.errors.JaxRuntimeError("UNKNOWN: Gloo AllGather failed: Connection reset by peer"))

    def fail(config, workdir):
        raise jax.errors.JaxRuntimeError(oom + "\nmore lines of XLA's")

    _fake_training(monkeypatch, fail)
    assert train.main(["--config", "tiny", "--workdir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err  # before: a traceback
    assert err.startswith("error: the device ran out of memory (RESOURCE_EXHAUSTED: Out of ")
    assert "(--train.selfplay-batch)" in err and "lost contact" not in err  # a real flag


@pytest.mark.slow
def test_a_resumed_budgeted_run_says_the_count_it_chose(tmp_path, capsys):
    workdir = str(tmp_path / "run")
    argv = ["--config", "tiny", "--workdir", workdir, "--no-progress", "--train.time-budget",
            "1h", "--train.num-iterations", "2"]
    assert train.main(argv) == 0
    out = capsys.readouterr().out
    assert "as many iterations as fit in 1h (at most 2; --train.time-budget)" in out
    assert train.main(argv) == 0  # run again: done already
    out = capsys.readouterr().out
    assert "2 iterations (chosen by its 1h time budget)" in out, out
    assert "as many iterations as fit" not in out  # before: as if it would choose again
