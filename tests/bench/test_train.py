"""bench/bench_train.py, the command line: the as-shipped comparison runs each pipeline in a
process of its own, on the XLA code paths its users get (the harness's own tests:
tests/bench/test_harness.py)."""

import json
import os

import pytest

from bench import bench_train
from c4jax.run import xla_flags

SMOKE = ["--blocks", "1", "--channels", "8", "--sims", "2", "--batch", "8", "--steps", "2"]


@pytest.mark.slow
def test_the_as_shipped_run_alternates_two_worker_processes(tmp_path, capsys):
    out = tmp_path / "r.json"
    bench_train.main([*SMOKE, "--repeats", "2", "--xla-paths", "as-shipped", "--out", str(out)])
    result = json.loads(out.read_text())
    settings = result["settings"]
    assert settings["xla_paths"] == "as-shipped"
    # What each pipeline ran with: the caller's XLA_FLAGS, YNNPACK fusion on for c4jax only.
    caller = [f for f in os.environ.get("XLA_FLAGS", "").split()
              if xla_flags.YNN_FLAG_NAME not in f]
    assert settings["xla_flags"] == {"c4jax": " ".join([*caller, xla_flags.YNN_FLAG]),
                                     "reference": " ".join(caller)}
    for label in ("c4jax self-play", "reference self-play", "c4jax sgd", "reference sgd"):
        assert len(result["times_s"][label]) == 2 and min(result["times_s"][label]) > 0
    assert set(result["compile_s"]) == {
        "c4jax self-play", "c4jax sgd", "reference self-play", "reference sgd"}
    ratio = result["summary"]["ratio_c4jax_over_reference"]
    assert ratio["selfplay_positions_per_s"] > 0 and ratio["paired_median"]["selfplay_wall"] > 0
    # Same network, same settings: the two pipelines store their own state per tree node.
    assert result["summary"]["pipelines"]["c4jax"]["node_bytes"] < (
        result["summary"]["pipelines"]["reference"]["node_bytes"])
    assert "c4jax/ref" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--iteration"], ["--stub-network"]])
def test_as_shipped_refuses_what_it_cannot_time(extra, usage_error):
    err = usage_error(bench_train.parse_args, ["--xla-paths", "as-shipped", *extra])
    assert "--xla-paths as-shipped" in err


def test_the_fused_iteration_is_not_timed_beside_a_stubbed_self_play(usage_error):
    """The fused ``run.iteration`` plays with the real network: printed beside the stub's
    pieces it read as a stubbed iteration."""
    err = usage_error(bench_train.parse_args, ["--stub-network", "--iteration"])
    assert "--iteration" in err and "real network" in err


@pytest.mark.parametrize("flag", ["--blocks", "--channels", "--sims", "--batch", "--steps",
                                  "--minibatch", "--sgd-steps", "--repeats"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_size_below_one_is_refused_naming_the_flag(flag, value, usage_error):
    """0 used to fall back to the preset's value (``args.x or preset``) and --repeats 0
    crashed after compiling; each is now an error at once."""
    err = usage_error(bench_train.parse_args, [flag, value])
    assert f"argument {flag}: got '{value}', allowed: a whole number >= 1" in err


def test_a_config_that_does_not_load_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_train.main(["--config", "nope"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "error: --config nope: no such file; presets: cpu, gpu, strong, tiny, tpu\n")


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--iteration", "--stub-network"])
def test_the_in_process_run_times_both_pipelines_the_floor_and_the_iteration(
        flag, tmp_path, capsys):
    """In one process: both pipelines and the network floor, and either the fused
    iteration or self-play around the stub (the two are refused together)."""
    out = tmp_path / "r.json"
    bench_train.main([*SMOKE, "--repeats", "2", flag, "--out", str(out)])
    result = json.loads(out.read_text())
    stub = flag == "--stub-network"
    assert result["settings"]["xla_paths"] == "same" and result["settings"]["stub_network"] is stub
    labels = {"c4jax self-play", "reference self-play", "c4jax sgd", "reference sgd",
              "network floor"} | ({"c4jax iteration"} if not stub else set())
    for label in labels:
        assert len(result["times_s"][label]) == 2 and min(result["times_s"][label]) > 0
        assert len(result["cpu_times_s"][label]) == 2
    assert set(result["compile_s"]) == labels and set(result["times_s"]) == labels
    summary = result["summary"]
    assert summary["network_floor"]["forward_passes"] == 2 * (2 + 1)
    assert (summary.get("c4jax_fused_iteration_s", 0) > 0) is not stub
    for row in summary["pipelines"].values():
        assert 0 <= row["positions_with_targets_per_chunk"] <= 8 * 2 * 2  # B x T, carried over
    printed = capsys.readouterr().out
    assert ("stub network in self-play" in printed) is stub
    assert ("c4jax fused run.iteration" in printed) is not stub


@pytest.mark.slow
def test_the_stub_chunk_is_the_run_s_own_self_play_around_the_stub():
    """--stub-network times c4jax's self-play with the network swapped out, nothing
    else: the run's random openings, blended value targets and root reuse included
    (before, the benchmark rebuilt a bare self-play that had none of them)."""
    import dataclasses

    import jax
    import numpy as np

    from bench.reference_pgx import stub_apply
    from c4jax import replay
    from c4jax.alphazero import config as config_lib
    from c4jax.alphazero import trainer

    cfg = config_lib.load("tiny")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(
        cfg.train, random_opening_moves=4, value_target_q=0.5))
    run = trainer.Trainer(cfg)
    state = run.init(jax.random.key(0))
    variables, key = run.variables(state), jax.random.key(1)
    games, positions, ready, _ = run.make_selfplay(stub_apply)(variables, key, state.selfplay)
    want = jax.device_get(replay.add(state.replay, positions, ready, shards=run.replay_shards))
    pipeline = bench_train.c4jax_pipeline(run, state, stub_apply)
    (_, buffer), _ = pipeline.play(variables, key, pipeline.carry)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(jax.device_get(buffer)), strict=True):
        np.testing.assert_array_equal(a, b)
