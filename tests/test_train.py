"""The whole run: learning, checkpoints, bit-for-bit resume, 2 devices, bad input."""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import jax
import numpy as np
import pytest
import xla_env
from commands import run_main

from c4jax import env, train
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import network, trainer
from c4jax.run import runlog, train_alphazero

ROOT = Path(__file__).resolve().parent.parent
# Standard errors the loss drop must clear. Over seeds 0-4 the drops measure
# 5.4-11.9 (value) and 14.2-24.7 (policy) standard errors.
_SIGMAS = 3.0


def _tiny(**train_overrides):
    cfg = config_lib.load("tiny")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **train_overrides))


def _leaves(state):
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(state))]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("full")
    return workdir, train_alphazero.train_and_evaluate(_tiny(), workdir, progress=False)


@pytest.mark.slow
def test_run_writes_config_metrics_events_and_checkpoints(uninterrupted):
    workdir, summary = uninterrupted
    assert summary["step"] == 4
    assert config_lib.load(str(workdir / "config.json")) == _tiny()
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert "win_rate/random" in records[1] and "win_rate/lookahead" in records[3]
    assert all(r["discarded_fraction"] <= 0.1 for r in records)
    assert list((workdir / "tb").glob("events.out.tfevents.*"))
    steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [2, 4]


def _per_position_losses(apply_fn, variables, data):
    """Per-position value squared error and policy cross-entropy, inference mode.

    Args:
        data: [N] ``replay.Positions``.

    Returns:
        Two [N] float64 arrays.
    """
    logits, value = apply_fn(variables, env.observe(data.state))
    log_p = np.asarray(jax.nn.log_softmax(logits), np.float64)
    value_se = (np.asarray(value, np.float64) - np.asarray(data.value, np.float64)) ** 2
    policy_ce = -np.sum(np.asarray(data.policy, np.float64) * log_p, axis=-1)
    return value_se, policy_ce


def _paired_drop(before, after):
    """Mean of ``before - after`` and its standard error (paired over positions)."""
    diff = before - after
    return diff.mean(), diff.std(ddof=1) / np.sqrt(diff.size)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_goes_down(tmp_path, seed):
    """After a short run the network fits the replay data better than at the start.

    Every position of the run's final buffer is scored by the trained and the
    initial network (inference mode); the drop in value squared error and in
    policy cross-entropy (equivalently, KL to the targets) must be positive by
    more than ``_SIGMAS`` standard errors of the paired per-position
    differences. The threshold is thus a noise estimate, not a fixed number,
    and a broken learner (zero learning rate, flipped gradient) fails it.
    """
    # 160 SGD steps as 20 iterations of 8 (no checkpoints between, no evaluation:
    # this test is about the learner).
    cfg = _tiny(num_iterations=20, sgd_steps=8, learning_rate=0.01)
    cfg = dataclasses.replace(cfg, seed=seed, checkpoint_every=20,
                              eval=dataclasses.replace(cfg.eval, every=0))
    state = train_alphazero.train_and_evaluate(cfg, tmp_path, progress=False)["state"]
    run = trainer.shared_trainer(cfg)  # the run's own programs, compiled already
    initial = run.init(trainer.run_keys(seed)[0]).learner
    size = int(state.replay.size)
    data = jax.tree.map(lambda x: x[:size], state.replay.data)
    apply_fn = network.make_apply_fn(run.network)

    def variables(learner_state):
        return {"params": learner_state.params, "batch_stats": learner_state.batch_stats}

    value0, policy0 = _per_position_losses(apply_fn, variables(initial), data)
    value1, policy1 = _per_position_losses(apply_fn, variables(state.learner), data)
    for name, before, after in [("value", value0, value1), ("policy", policy0, policy1)]:
        drop, se = _paired_drop(before, after)
        assert drop > _SIGMAS * se, f"{name} loss fell by {drop:.4f}, noise {se:.4f}"


@pytest.mark.slow
def test_interrupted_and_resumed_run_matches_bit_for_bit(uninterrupted, tmp_path):
    _, full = uninterrupted
    first = train_alphazero.train_and_evaluate(_tiny(), tmp_path, progress=False, stop_after=1)
    assert first["step"] == 1
    resumed = train_alphazero.train_and_evaluate(_tiny(), tmp_path, progress=False)
    assert resumed["step"] == 4
    for a, b in zip(_leaves(full["state"]), _leaves(resumed["state"]), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_incompatible_checkpoint_is_rejected_naming_the_field(uninterrupted):
    workdir, _ = uninterrupted
    cfg = _tiny()
    cfg = dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, channels=16))
    with pytest.raises(ValueError, match=r"network\.channels is 8 in the checkpoint but 16"):
        train_alphazero.train_and_evaluate(cfg, workdir, progress=False)
    cfg = _tiny()
    cfg = dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, value_channels=4))
    with pytest.raises(ValueError, match=r"network\.value_channels is 1 in the checkpoint but 4"):
        train_alphazero.train_and_evaluate(cfg, workdir, progress=False)


@pytest.mark.slow
def test_gating_turned_on_at_a_resume_starts_from_the_trained_network(uninterrupted, tmp_path):
    """Without gating the state's best network stays the first one; a resume that turns
    gating on must self-play with the network trained so far, not with that one."""
    workdir, full = uninterrupted
    run = tmp_path / "run"
    shutil.copytree(workdir, run)
    cfg = _tiny(num_iterations=5)
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, gating=0.55,
                                                           gating_games=2))
    seen = []

    def record(state, done):
        seen.append((done, _leaves(state.best), _leaves(trainer.Trainer.variables(state))))
        return state

    train_alphazero.train_and_evaluate(cfg, run, progress=False, corrupt=record)
    (done, best, trained), = seen
    assert done == 4
    first = _leaves(full["state"].best)  # the network of iteration 0, never promoted
    assert any(not np.array_equal(a, b) for a, b in zip(first, trained, strict=True))
    for a, b in zip(best, trained, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_rerunning_a_finished_run_directory_uses_its_config(uninterrupted):
    workdir, _ = uninterrupted
    call = train.parse_args(["--workdir", str(workdir)])
    assert call.workdir == workdir and call.config == _tiny() and call.preset is None


@pytest.mark.slow
def test_asking_for_fewer_iterations_than_done_does_nothing_and_says_so(uninterrupted, capsys):
    workdir, _ = uninterrupted
    before = (workdir / "config.json").read_text()
    summary = train_alphazero.train_and_evaluate(_tiny(num_iterations=2), workdir, progress="lines")
    assert summary["done"] == 0 and summary["step"] == 4
    assert "nothing to do: " in capsys.readouterr().out
    assert (workdir / "config.json").read_text() == before  # not rewritten


@pytest.mark.slow
def test_nan_loss_stops_the_run_keeping_the_last_good_checkpoint(tmp_path):
    """Parameters turned to NaN before iteration 4: the guard stops there, saves
    nothing after checkpoint 2, and a resume continues from that checkpoint."""
    cfg = dataclasses.replace(_tiny(num_iterations=6), checkpoint_every=2)

    def corrupt(state, step):
        if step != 3:
            return state
        params = jax.tree.map(lambda x: x * np.nan, state.learner.params)
        return state.replace(learner=state.learner.replace(params=params))

    expected = r"NaN/inf at iteration 4 .*checkpoint 2 is kept"
    with pytest.raises(train_alphazero.NonFiniteError, match=expected):
        train_alphazero.train_and_evaluate(cfg, tmp_path, corrupt=corrupt)
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [2]
    logged = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").open()]
    assert logged == [1, 2, 3]  # the broken iteration is not logged
    summary = train_alphazero.train_and_evaluate(cfg, tmp_path)
    assert summary["done"] == 4 and summary["metrics"]["params_finite"] == 1.0


def _cli(*args, devices=1):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if devices > 1:
        env["XLA_FLAGS"] = xla_env.with_devices(devices)
    return subprocess.run(
        [sys.executable, "-m", "c4jax.train", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )


@pytest.mark.slow
def test_two_device_run_from_the_command_line(tmp_path):
    out = _cli(
        "--config", "tiny", "--workdir", str(tmp_path), "--train.num-iterations", "2",
        "--eval.every", "0", devices=2,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "iterations on 2 x cpu" in out.stdout
    assert "YNNPACK fusion on" in out.stdout  # added to the XLA_FLAGS the user gave
    assert (tmp_path / "checkpoints" / "2").exists()
    # Checkpoints keep the replay buffer in an order of no device count: one device goes on.
    resumed = _cli("--workdir", str(tmp_path), "--train.num-iterations", "3")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {tmp_path} from iteration 2 of 3" in resumed.stdout
    assert "iterations on 1 x cpu" in resumed.stdout


def _main(capsys, *args) -> subprocess.CompletedProcess:
    """``python -m c4jax.train ARGS`` run in this process (``train.main``): its exit code
    and output, as ``_cli`` gives them, without a process start (which ``_cli`` tests)."""
    return subprocess.CompletedProcess(["c4jax.train", *args],
                                       *run_main(train.main, args, capsys))


@pytest.mark.slow
def test_bad_input_fails_before_compiling_in_a_process_of_its_own(tmp_path):
    out = _cli("--config", "tiny", "--train.selfplay-batch", "3", "--workdir", str(tmp_path),
               devices=2)
    assert out.returncode == 2
    assert "multiple of the device count (2)" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--train.minibatch-size", "0"], "train.minibatch_size"),
        (["--train.bogus", "1"], "Unrecognized options: --train.bogus"),
        (["--search.algorithm", "alphabeta"], "invalid choice 'alphabeta'"),
        (["--config", "nonexistent"], "presets: cpu, gpu, strong, tiny, tpu"),
        (["--workdir", "README.md"], "--workdir README.md: exists and is a file, not a directory"),
        (["--workdir", "README.md/run"], "lies below README.md, which is a file"),
        (["--workdir", "/proc/c4jax/run"], "--workdir /proc/c4jax/run: cannot create /proc/c4jax"),
        (["--train.learning-rate", "nan"], "train.learning_rate"),
    ],
)
def test_bad_input_fails_before_compiling_with_a_clear_message(args, message, tmp_path,
                                                              capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # README.md is a file there
    base = ["--config", "tiny"] if "--config" not in args else []
    workdir = [] if "--workdir" in args else ["--workdir", str(tmp_path)]
    out = _main(capsys, *base, *args, *workdir)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "checkpoints").exists()


def _start(workdir, *args):
    """A training subprocess on the tiny preset, its output piped (no terminal)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen(
        [sys.executable, "-m", "c4jax.train", "--config", "tiny", "--workdir", str(workdir),
         "--eval.every", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )


def _wait_for(condition, proc, what, timeout=600):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no {what}; stderr: {proc.communicate()[1][-2000:]}")
        time.sleep(0.01)


def _logged_steps(workdir):
    path = workdir / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.open()] if path.exists() else []


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_says_how_to_continue_and_exits_130(tmp_path):
    proc = _start(tmp_path, "--train.num-iterations", "100000", "--checkpoint-every", "100000")
    _wait_for(lambda: len(_logged_steps(tmp_path)) >= 2, proc, "second iteration")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    assert "Ctrl-C: finishing this iteration, saving a checkpoint" in err
    assert f"continue with: python -m c4jax.train --workdir {tmp_path}" in out
    assert "Traceback" not in err
    last = _logged_steps(tmp_path)[-1]
    assert (tmp_path / "checkpoints" / str(last)).exists()


@pytest.mark.slow
def test_second_ctrl_c_aborts_at_once_even_while_compiling(tmp_path):
    proc = _start(tmp_path, "--config", "cpu", "--train.num-iterations", "2")
    lines = []
    _wait_for(lambda: lines.append(proc.stdout.readline()) or "compiling" in lines[-1],
              proc, "compiling message")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - asked < 10  # the cpu preset compiles for minutes
    assert proc.returncode == 130
    assert "Aborted. Continue from the last checkpoint with: python -m c4jax.train" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_save_then_resume(tmp_path):
    """SIGKILL while Orbax writes a checkpoint (a big replay buffer makes the
    write take a while); the next run resumes from the last complete one."""
    args = ("--train.num-iterations", "6", "--checkpoint-every", "1",
            "--train.replay-capacity", "2000000")
    proc = _start(tmp_path, *args)
    checkpoint_dir = tmp_path / "checkpoints"

    def saving():  # an Orbax temporary directory of a step after the first
        names = [p.name for p in checkpoint_dir.iterdir()] if checkpoint_dir.exists() else []
        return any("tmp" in n and not n.startswith("1.") for n in names)

    _wait_for(saving, proc, "checkpoint being written")
    proc.kill()
    proc.wait()
    logged = _logged_steps(tmp_path)
    # Resumed with only the last checkpoint to save: what is under test is what it
    # resumes from, not four more saves of the big buffer.
    out = _cli("--workdir", str(tmp_path), "--checkpoint-every", "6")
    assert out.returncode == 0, out.stderr[-3000:]
    resumed_from = int(out.stdout.split("resuming ")[1].split("from iteration ")[1].split()[0])
    assert 1 <= resumed_from < max(logged)
    assert _logged_steps(tmp_path) == list(range(1, 7))
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_a_second_trainer_on_the_same_directory_is_refused(tmp_path, capsys):
    first = _start(tmp_path, "--train.num-iterations", "100000", "--checkpoint-every", "5")
    try:
        _wait_for(lambda: len(_logged_steps(tmp_path)) >= 1, first, "first iteration")
        second = _main(capsys, "--workdir", str(tmp_path))
        assert second.returncode == 2
        assert f"error: {tmp_path} is in use by process {first.pid} on " in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.kill()  # kill -9: its lock must not outlive it
        first.wait()
    resumed = _main(capsys, "--workdir", str(tmp_path), "--train.num-iterations", "6")
    assert resumed.returncode == 0, resumed.stderr[-3000:]


@pytest.mark.slow
def test_resume_after_a_crash_logs_each_step_once(tmp_path):
    """Steps logged after the last checkpoint (lost in a crash) are logged again
    on resume, not twice; a torn last line does not break the resume."""
    cfg = _tiny()
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, every=0))
    train_alphazero.train_and_evaluate(cfg, tmp_path, progress=False, stop_after=2)
    metrics = tmp_path / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    fake = json.loads(lines[-1])
    fake["step"] = 3  # as if step 3 was logged, then the process died before saving
    metrics.write_text("\n".join(lines + [json.dumps(fake), '{"step": 4, "lo']) + "\n")
    train_alphazero.train_and_evaluate(cfg, tmp_path, progress=False)
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


@pytest.mark.slow
def test_strength_options_run_on_the_tiny_preset(tmp_path):
    """Random openings, the mixed value target (lambda-returns), length shaping, playout cap
    randomization, the one-cycle schedule, a growing replay window, the opponent-reply
    and final-board heads, threat planes, policy surprise weighting, starts from the
    surprising positions, larger searches for the games nearest their start, fewer
    endgame draws, another evaluation move and the Gumbel noise's cut-off, together."""
    cfg = _tiny(num_iterations=2, random_opening_moves=4, value_target_q=0.5,
                value_target_lambda=0.5, value_length_shaping=0.3, replay_window=100,
                full_search_fraction=0.5, fast_search_simulations=2, lr_schedule="onecycle",
                policy_surprise_weight=0.5, surprise_starts=0.5, surprise_pool=64,
                opening_search_games=4, opening_search_simulations=8,
                endgame_sample_weight=0.5, endgame_stones=20)
    cfg = dataclasses.replace(
        cfg, search=dataclasses.replace(cfg.search, evaluation_move="policy", gumbel_noise_moves=6),
        network=dataclasses.replace(cfg.network, opponent_head=True, final_board_head=True,
                                    threat_planes=True),
    )
    summary = train_alphazero.train_and_evaluate(cfg, tmp_path, progress=False)
    assert summary["state"].learner.params["Conv_0"]["kernel"].shape[2] == 4  # threat planes
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert summary["step"] == 2 and records[-1]["opening_moves"] > 0
    assert records[-1]["opponent_policy_loss"] > 0
    buffer = summary["state"].replay
    replies = np.asarray(buffer.data.next_policy)[: int(buffer.size)]
    np.testing.assert_allclose(np.sort(np.unique(replies.sum(-1).round(4))), [0.0, 1.0])
    assert records[-1]["policy_surprise"] > 0
    assert records[-1]["pool_start_fraction"] > 0  # the first chunk filled the pool
    weights = np.asarray(buffer.data.weight)[: int(buffer.size)]
    assert weights.min() >= 0.5 and weights.max() > 1  # (1 - 0.5) + 0.5 k / mean(k)
    assert "win_rate/lookahead" in records[-1]
    assert 0 < np.mean([r["full_search_fraction"] for r in records]) < 1
    values = np.asarray(summary["state"].replay.data.value)[: int(summary["state"].replay.size)]
    assert np.any((values != 0) & (np.abs(values) != 1))  # mixed with the search value
    # Every stored position's final board holds its stones, on the same sides, and
    # ends the game: four in a row or a full board.
    assert records[-1]["final_board_loss"] > 0
    size = int(buffer.size)
    final = np.asarray(buffer.data.final_board)[:size]
    now = jax.tree.map(lambda x: np.asarray(x)[:size], buffer.data.state)
    for mine, word in ((0, "lo"), (1, "hi")):
        own, every = getattr(now, f"own_{word}"), getattr(now, f"all_{word}")
        assert np.all(own & ~final[:, mine] == 0)  # the mover's stones stay the mover's
        assert np.all((own ^ every) & ~(final[:, mine] ^ final[:, 2 + mine]) == 0)
    own_four = env.has_four(final[:, 0], final[:, 1])
    other_four = env.has_four(final[:, 0] ^ final[:, 2], final[:, 1] ^ final[:, 3])
    stones = [bin(int(lo)).count("1") + bin(int(hi)).count("1") for lo, hi in final[:, 2:]]
    assert np.all(np.asarray(own_four) | np.asarray(other_four) | (np.array(stones) == 42))


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_is_set_aside_with_a_warning(tmp_path):
    """Half of one data file of checkpoint 3 is cut off: the command line warns in
    one line, moves it to damaged-checkpoints/ and resumes from checkpoint 2."""
    cfg = dataclasses.replace(_tiny(num_iterations=3), checkpoint_every=1)
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, every=0))
    train_alphazero.train_and_evaluate(cfg, tmp_path)
    data = max((tmp_path / "checkpoints" / "3" / "state").glob("**/d/*"),
               key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    out = _cli("--workdir", str(tmp_path), "--train.num-iterations", "4")
    assert out.returncode == 0, out.stderr[-3000:]
    warning = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "checkpoint 3 in" in warning[0]
    assert "is damaged" in warning[0] and "using checkpoint 2" in warning[0]
    assert "Traceback" not in out.stderr
    assert f"resuming {tmp_path} from iteration 2 of 4" in out.stdout
    assert (tmp_path / "damaged-checkpoints" / "3" / "state").is_dir()  # kept, not deleted
    assert _logged_steps(tmp_path) == [1, 2, 3, 4]


_FAST = "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise"  # YNNPACK fusion on


def test_the_timings_file_names_its_hardware_and_commands():
    """configs/timings/cpu.json: per preset, measurements that say where they come from."""
    timings = train_alphazero.cpu_timings()
    assert timings and set(timings) <= set(config_lib.preset_names())
    for preset, entries in timings.items():
        assert entries, preset
        for entry in entries:
            assert entry["hardware"]["cpu"] and entry["hardware"]["cores"] >= 1
            assert entry["jax"] and entry["xla_path"] in ("fast", "default")
            assert entry["compile_seconds"] > 0 and entry["seconds_per_iteration"] > 0
            assert entry["command"].startswith(f"python -m c4jax.train --config {preset}")
            assert isinstance(entry["measured"], bool)


def _durations(preset, path, iterations):
    """The fastest and slowest machine's expected time, as the data file gives them."""
    entries = [e for e in train_alphazero.cpu_timings()[preset] if e["xla_path"] == path]
    totals = sorted(e["compile_seconds"] + iterations * e["seconds_per_iteration"]
                    for e in entries)
    if not entries:  # nothing measured on this code path
        return None, None, entries
    return totals[0], totals[-1], entries


@pytest.mark.parametrize("path, flags", [("fast", _FAST), ("default", "")])
@pytest.mark.parametrize("preset", sorted(train_alphazero.cpu_timings()))
def test_the_expected_time_reads_the_timings_and_scales_with_iterations(
    preset, path, flags, monkeypatch
):
    monkeypatch.setenv("XLA_FLAGS", flags)
    config = config_lib.load(preset)
    lines = []
    for iterations in (config.train.num_iterations, 4 * config.train.num_iterations):
        line = train_alphazero.expected_time(config, preset, iterations)
        low, high, entries = _durations(preset, path, iterations)
        if not entries:
            assert "shown once the first iterations have run" in line
            return
        assert line.startswith(f"expected time: about {runlog.format_duration(low)}")
        assert runlog.format_duration(high) in line
        cores = {e["hardware"]["cores"] for e in entries}
        assert f"on an idle {'/'.join(map(str, sorted(cores)))}-core CPU" in line
        assert all(e["hardware"]["cpu"] in line for e in entries if
                   e["compile_seconds"] + iterations * e["seconds_per_iteration"] in (low, high))
        measured = [e["measured"] for e in entries]
        how = "measured" if all(measured) else "partly estimated" if any(measured) else "estimated"
        assert f", {how}; compiling first" in line
        assert "ETA takes over once iterations run" in line
        lines.append((low, line))
    (low1, line1), (low4, line4) = lines
    assert low4 > low1 and line4 != line1  # more iterations, a longer estimate


@pytest.mark.parametrize("flags, word", [
    ((True, True), "measured"), ((True, False), "partly estimated"),
    ((False, False), "estimated"),
])
def test_the_expected_time_says_whether_its_figures_were_measured(flags, word, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", _FAST)
    entry = {"hardware": {"cores": 2}, "jax": "0.10.2", "xla_path": "fast",
             "compile_seconds": 60, "seconds_per_iteration": 6.0, "command": "c"}
    timings = {"cpu": [{**entry, "hardware": {"cpu": f"CPU {i}", "cores": 2}, "measured": m,
                        "seconds_per_iteration": 6.0 * (i + 1)} for i, m in enumerate(flags)]}
    line = train_alphazero.expected_time(config_lib.load("cpu"), "cpu", 100, timings)
    assert f"(CPU 0 to CPU 1, {word}; compiling first: about 60 s)" in line, line


def test_the_expected_time_is_left_to_the_eta_off_its_measurements(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", _FAST)
    cpu = config_lib.load("cpu")
    later = "expected time: shown once the first iterations have run"
    assert train_alphazero.expected_time(cpu, "cpu", 100) != later
    changed = dataclasses.replace(cpu, search=dataclasses.replace(cpu.search, num_simulations=32))
    assert train_alphazero.expected_time(changed, "cpu", 100) == later  # another config
    assert train_alphazero.expected_time(cpu, None, 100) == later  # a config file
    assert train_alphazero.expected_time(cpu, "gpu", 100) == later  # nothing measured
    reseeded = dataclasses.replace(cpu, seed=7)  # the seed changes no timing
    assert train_alphazero.expected_time(reseeded, "cpu", 100) != later
    monkeypatch.setattr(train_alphazero.jax, "default_backend", lambda: "gpu")
    assert train_alphazero.expected_time(cpu, "cpu", 100) == later  # not a CPU


@pytest.mark.slow
def test_resume_continues_the_newest_run_and_names_it(uninterrupted, tmp_path, monkeypatch,
                                                      capsys):
    """``--resume`` without ``--workdir`` takes the run in runs/ written to last."""
    workdir, _ = uninterrupted
    runs = tmp_path / "runs"
    (runs / "older").mkdir(parents=True)
    config_lib.save(_tiny(), runs / "older" / "config.json")
    os.utime(runs / "older" / "config.json", (1, 1))
    shutil.copytree(workdir, runs / "newer")
    monkeypatch.chdir(tmp_path)
    assert train.main(["--resume", "--no-progress"]) == 0
    out = capsys.readouterr().out
    picked = Path("runs") / "newer"
    assert f"--resume: continuing {picked}, the run in runs/ written to last" in out
    assert f"nothing to do: {picked} has done 4 iterations" in out


# --- A time budget. ---


def test_the_iterations_that_fit_a_budget():
    fit = lambda **k: train_alphazero.iterations_for_budget(  # noqa: E731
        **{"budget": 3600, "elapsed": 100, "iteration": 10,
           "evaluation": 40, "eval_every": 20, "most": 10_000, **k})
    # 3600 - 100 - 40 (the last evaluation) = 3460 s at 10 + 40 / 20 = 12 s each: the
    # run compiles nothing more (its iteration is the one timed, its length an argument).
    assert fit() == 288
    assert fit(eval_every=0) == (3600 - 100) // 10
    assert fit(most=50) == 50
    assert fit(budget=140) == 0 and fit(budget=100) == 0


def test_the_count_measured_again_fills_what_is_left_of_the_budget():
    again = lambda **k: train_alphazero.replanned_count(  # noqa: E731
        **{"budget": 7200, "elapsed": 900, "done": 128, "seconds_each": 4.5,
           "evaluation": 9, "most": 2000, **k})
    # 7200 - 900 - 9 (the last evaluation) = 6291 s left: 1398 more at 4.5 s.
    assert again() == 128 + 1398
    assert again(most=1000) == 1000
    # Slower than the budget allows: the run ends where it is, evaluated and saved.
    assert again(elapsed=7195) == 128 and again(elapsed=9000) == 128


def _replan(total, *, eval_every=10, budget=7200.0, evaluation=9.0, most=2000):
    """A BudgetReplan on a stand-in clock that the test advances; returns it, the
    clock, the counts it applied and what it said."""
    clock = types.SimpleNamespace(now=0.0)
    applied, said = [], []
    replan = train_alphazero.BudgetReplan(
        budget=budget, text="2h", started=0.0, total=total, most=most,
        eval_every=eval_every, evaluation=lambda: evaluation,
        recount=lambda count: applied.append(count) or f"config of {count}",
        say=said.append, clock=lambda: clock.now)
    return replan, clock, applied, said


def test_the_budget_is_measured_again_from_the_pace_after_the_first_iterations():
    """The first look of the shipped run's case: the first iterations timed 4.8 s,
    but the run's own went faster once under way."""
    replan, clock, applied, said = _replan(1285)
    assert replan.looks == [128, 321, 642] and replan.since == 68  # 6 evaluation periods
    clock.now = 180.0  # launch, compiling, timing
    answers = []
    for step in range(1, 129):
        clock.now += 5.0 if step <= 68 else 4.4
        answers.append(replan(step, 1285))
    assert answers[:-1] == [None] * 127
    # At 128: 180 + 68 x 5 + 60 x 4.4 = 784 s in; 7200 - 784 - 9 = 6407 s left at 4.4 s.
    assert answers[-1] == (128 + 1456, "config of 1584") and applied == [1584]
    assert said == ["time budget 2h: iterations 69-128 took 4.40 s each (evaluations and "
                    "saves included) and 13 min have passed, so 1584 iterations in all, "
                    "not 1285; config.json keeps the new count for resuming"]
    assert replan(129, 1584) is None


def _simulate(pace, *, looks=True, budget=7200.0, evaluation=7.2, every=10, calibrated=4.8):
    """A budgeted run on a stand-in clock: ``pace(step)`` seconds an iteration, an
    evaluation every ``every`` and after the last; returns (end, iterations)."""
    started = 96.0  # compiling and timing the budget (the shipped run's machine)
    total = train_alphazero.iterations_for_budget(
        budget, elapsed=started, iteration=calibrated, evaluation=evaluation,
        eval_every=every, most=2000)
    replan, clock, _, _ = _replan(total, eval_every=every, budget=budget, evaluation=evaluation)
    clock.now, step = started, 0
    while step < total:
        step += 1
        clock.now += pace(step)
        planned = replan(step, total) if looks else None
        total = max(step, planned[0]) if planned else total
        if step % every == 0 or step == total:
            clock.now += evaluation
    return clock.now, total


def test_a_run_faster_than_timed_ends_near_its_budget_not_a_tenth_short():
    """The shipped run's measured pace (4.8 s an iteration at the start, as its budget
    timed, then 4.56, 4.42 and 4.33 s): its 2-hour budget ended 9% short. With the
    looks it fills the budget to within 2%, and never overruns it."""
    def zen5(step):
        return 4.8 if step <= 130 else 4.56 if step <= 400 else 4.42 if step <= 800 else 4.33

    end, count = _simulate(zen5, looks=False)
    assert count == 1285 and end < 0.94 * 7200  # what happened
    end, count = _simulate(zen5)
    assert 0.98 * 7200 < end <= 7200 and count > 1350
    steady, count = _simulate(lambda step: 4.8)  # timed right: the looks change nothing
    assert count == 1285 and steady <= 7200


def test_each_look_times_the_iterations_since_the_one_before():
    replan, clock, applied, said = _replan(1285, most=1285)
    for step in range(1, 643):
        clock.now += 4.0
        assert replan(step, 1285) is None  # the most allowed already: kept
    assert applied == [] and len(said) == 3
    assert [line.split(" took")[0] for line in said] == [
        "time budget 2h: iterations 69-128", "time budget 2h: iterations 129-321",
        "time budget 2h: iterations 322-642"]
    assert all(line.endswith("so the run keeps its 1285 iterations") for line in said)
    # A short run: the step it would look at is its last (or beyond), so no look.
    short, clock, applied, said = _replan(20)
    for step in range(1, 21):
        clock.now += 1.0
        assert short(step, 20) is None
    assert applied == [] and said == []


def test_slower_iterations_than_timed_end_the_run_early_instead_of_overrunning():
    """A budget timed at 3.6 s an iteration whose iterations turn twice as slow half
    way to the second look (another job took a core, say)."""
    replan, clock, applied, said = _replan(1000, eval_every=0, budget=3600.0, evaluation=0.0)
    assert (replan.looks, replan.since) == ([100, 250, 500], 50)
    step, total = 0, 1000
    while step < total:
        step += 1
        clock.now += 3.6 if step <= 50 else 7.2
        planned = replan(step, total)
        total = planned[0] if planned else total
    # 100 iterations in 540 s; 3060 s left at 7.2 s: 425 more, not 900. The later
    # looks see the same pace and keep the count.
    assert applied == [525] and len(said) == 3 and step == 525
    assert clock.now == pytest.approx(3600, abs=7.2)


@pytest.mark.slow
def test_a_budget_that_fits_every_iteration_trains_as_without_one(uninterrupted, tmp_path,
                                                                   capsys):
    """Timing the first iterations leaves no trace: the run is bit for bit the one
    without a budget, and its config.json keeps the budget and the count."""
    _, full = uninterrupted
    summary = train_alphazero.train_and_evaluate(_tiny(time_budget="1h"), tmp_path,
                                                 progress="lines")
    out = capsys.readouterr().out
    assert "time budget 1h: compiling took" in out
    assert "so 4 iterations (the most allowed, train.num_iterations)" in out
    assert "compiling the training step" not in out  # the run goes on with what it timed
    assert summary["step"] == 4
    for a, b in zip(_leaves(full["state"]), _leaves(summary["state"]), strict=True):
        np.testing.assert_array_equal(a, b)
    stored = json.loads((tmp_path / "config.json").read_text())["train"]
    assert (stored["time_budget"], stored["num_iterations"]) == ("1h", 4)
    # Finished: a larger count does nothing under the budget, and the message says
    # what does (not "raise it", which the user just did).
    again = train_alphazero.train_and_evaluate(_tiny(time_budget="1h", num_iterations=8),
                                               tmp_path, progress="lines")
    out = capsys.readouterr().out
    assert again["done"] == 0 and "raise it to train on" not in out
    assert "has done 4 iterations, the 4 its time budget (1h) chose; to train on, give " \
           "--train.time-budget '' and a larger --train.num-iterations" in out
    more = train_alphazero.train_and_evaluate(_tiny(num_iterations=5), tmp_path, progress=False)
    assert (more["done"], more["step"]) == (1, 5)  # as the message said


@pytest.mark.slow
def test_the_count_measured_again_is_the_run_s_from_then_on(tmp_path, capsys, monkeypatch):
    """A time budget looked at again after iteration 3 of the 8 it chose, and the
    new count 3: the run ends there, evaluated and saved, with the count in
    config.json and its lines, and a resume keeps it."""
    monkeypatch.setattr(train_alphazero, "REPLAN_MIN_STEP", 3)
    looked = []
    monkeypatch.setattr(train_alphazero, "replanned_count",
                        lambda budget, **k: looked.append(k) or 3)
    summary = train_alphazero.train_and_evaluate(_tiny(time_budget="1h", num_iterations=8),
                                                 tmp_path, progress="lines")
    out = capsys.readouterr().out
    assert [k["done"] for k in looked] == [3] and looked[0]["most"] == 8
    assert looked[0]["evaluation"] > 0  # the evaluation after iteration 2, timed
    assert looked[0]["seconds_each"] > 0  # iteration 3, after the window's start at 2
    assert "time budget 1h: iterations 3-3 took" in out
    assert "so 3 iterations in all, not 8; config.json keeps the new count" in out
    assert "iteration 2/8" in out and "iteration 3/3" in out and "iteration 4/" not in out
    assert summary["step"] == 3
    stored = json.loads((tmp_path / "config.json").read_text())["train"]
    assert (stored["time_budget"], stored["num_iterations"]) == ("1h", 3)
    saved = tmp_path / "checkpoints"
    assert (saved / "3").exists() and not (saved / "4").exists()
    again = train_alphazero.train_and_evaluate(_tiny(time_budget="1h"), tmp_path,
                                               progress="lines")
    assert again["done"] == 0 and "has done 3 iterations, the 3 its time budget (1h) chose" \
        in capsys.readouterr().out


@pytest.mark.slow
def test_a_budgeted_run_resumes_with_the_count_it_chose(uninterrupted, tmp_path, capsys):
    _, full = uninterrupted
    first = train_alphazero.train_and_evaluate(_tiny(time_budget="1h"), tmp_path,
                                               progress=False, stop_after=1)
    assert first["step"] == 1
    # Asked for at most 50 now: the run keeps its 4 (and their learning-rate schedule).
    resumed = train_alphazero.train_and_evaluate(
        _tiny(time_budget="1h", num_iterations=50), tmp_path, progress="lines")
    assert "the run keeps the 4 iterations it chose when it started" in capsys.readouterr().out
    assert resumed["step"] == 4
    for a, b in zip(_leaves(full["state"]), _leaves(resumed["state"]), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"train.time_budget: the run in .* started with a "
                                         r"time budget of 1h"):
        train_alphazero.train_and_evaluate(_tiny(time_budget="2h"), tmp_path)


@pytest.mark.slow
def test_the_budget_times_the_gating_match_of_each_evaluation(tmp_path, monkeypatch):
    """With gating on, every evaluation plays a gating match too: the budget must
    count it, or the run overruns."""
    from c4jax.judge import periodic

    played, real = [], periodic.gating_match
    monkeypatch.setattr(periodic, "gating_match",
                        lambda *a, **k: played.append(k["num_games"]) or real(*a, **k))
    cfg = _tiny(time_budget="1h")
    cfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, gating=0.55,
                                                            gating_games=2))
    run = trainer.Trainer(cfg)
    fitted, _ = train_alphazero.fit_time_budget(cfg, run, time.monotonic(), say=lambda t: None)
    assert played == [2, 2]  # compiling, then timed (as found: never played)
    assert fitted.train.num_iterations == cfg.train.num_iterations


@pytest.mark.slow
def test_a_budget_too_short_for_one_iteration_names_the_field(tmp_path, monkeypatch):
    # A machine 1000 times slower at timing the iterations: an iteration "takes" far
    # longer than the budget, whether or not this process compiled it before.
    slow = types.SimpleNamespace(monotonic=time.monotonic,
                                 perf_counter=lambda: 1000 * time.perf_counter())
    monkeypatch.setattr(train_alphazero, "time", slow)
    with pytest.raises(ValueError, match=r"train.time_budget: 1s leaves no time for an "
                                         r"iteration here \(compiling took"):
        train_alphazero.train_and_evaluate(_tiny(time_budget="1s"), tmp_path)
    assert not (tmp_path / "checkpoints").exists() or not any(
        (tmp_path / "checkpoints").iterdir())


def test_train_and_evaluate_refuses_a_preset_name_and_a_bad_progress(tmp_path):
    """``train_and_evaluate("tiny", dir)``, as the docs' "a preset name" invites, was an
    AttributeError ('str' object has no attribute 'distributed')."""
    with pytest.raises(TypeError, match=r"config: got str 'tiny'; give a Config, e\.g\."):
        train_alphazero.train_and_evaluate("tiny", tmp_path)
    with pytest.raises(ValueError, match="progress: got 'verbose'"):
        train_alphazero.train_and_evaluate(config_lib.load("tiny"), tmp_path,
                                           progress="verbose")
    assert not any(tmp_path.iterdir())  # refused before anything is written
