"""bench/bench_train.py: the as-shipped comparison runs each pipeline in a process of
its own, on the XLA code paths its users get."""

import json

import pytest

from bench import bench_train
from c4jax.run import xla_flags

SMOKE = ["--blocks", "1", "--channels", "8", "--sims", "2", "--batch", "8", "--steps", "2"]


def test_each_pipeline_gets_its_users_xla_flags():
    user = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2 "
                         "--xla_cpu_experimental_ynn_fusion_type=dot", "PATH": "/bin"}
    ours = bench_train.pipeline_env("c4jax", user)
    theirs = bench_train.pipeline_env("reference", user)
    assert ours["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=2", xla_flags.YNN_FLAG]
    assert theirs["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert theirs[xla_flags.OPT_OUT] == "0" and ours["PATH"] == theirs["PATH"] == "/bin"
    assert "ynn" in user["XLA_FLAGS"]  # the caller's environment is not edited


def test_the_as_shipped_run_alternates_two_worker_processes(tmp_path, capsys):
    out = tmp_path / "r.json"
    bench_train.main([*SMOKE, "--repeats", "2", "--xla-paths", "as-shipped", "--out", str(out)])
    result = json.loads(out.read_text())
    settings = result["settings"]
    assert settings["xla_paths"] == "as-shipped"
    assert settings["xla_flags"] == {"c4jax": xla_flags.YNN_FLAG, "reference": ""}
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


@pytest.mark.parametrize("extra", [["--iteration"], ["--stub-network"]])
def test_as_shipped_refuses_what_it_cannot_time(extra, usage_error):
    err = usage_error(bench_train.parse_args, ["--xla-paths", "as-shipped", *extra])
    assert "--xla-paths as-shipped" in err
