"""bench/harness.py: the alternation, the one record of a timed call, the summary's ratios,
and each worker's XLA flags. Fake pipelines: nothing here compiles."""

import json
import types

import pytest

from bench import harness
from c4jax.run import xla_flags


def test_each_pipeline_gets_its_users_xla_flags():
    user = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2 "
                         "--xla_cpu_experimental_ynn_fusion_type=dot", "PATH": "/bin"}
    ours = harness.pipeline_env("c4jax", user)
    theirs = harness.pipeline_env("reference", user)
    assert ours["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=2", xla_flags.YNN_FLAG]
    assert theirs["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert theirs[xla_flags.OPT_OUT] == "0" and ours["PATH"] == theirs["PATH"] == "/bin"
    assert "ynn" in user["XLA_FLAGS"]  # the caller's environment is not edited


def test_a_call_is_one_record_in_this_process_and_on_the_wire():
    play = harness.Call(wall=0.5, cpu=0.9, found=12)
    sgd = harness.Call(wall=0.25, cpu=0.3)
    assert play.to_json() == {"wall": 0.5, "cpu": 0.9, "found": 12}
    assert sgd.to_json() == {"wall": 0.25, "cpu": 0.3}  # no targets from an SGD call
    for call in (play, sgd):
        assert harness.Call.from_json(json.loads(json.dumps(call.to_json()))) == call


class FakeRunner:
    """A pipeline whose calls take fixed times; it logs the order it was asked in."""

    def __init__(self, name, play_s, sgd_s, log):
        self.name, self.play_s, self.sgd_s, self.log = name, play_s, sgd_s, log

    def play(self, repeat):
        self.log.append((self.name, "play", repeat))
        return harness.Call(wall=self.play_s[repeat], cpu=2 * self.play_s[repeat], found=repeat)

    def learn(self, repeat):
        self.log.append((self.name, "learn", repeat))
        return harness.Call(wall=self.sgd_s[repeat], cpu=self.sgd_s[repeat])


def test_alternation_reverses_the_order_every_other_repeat():
    log = []
    ours = FakeRunner("c4jax", [1.0, 2.0, 3.0], [0.1, 0.2, 0.3], log)
    theirs = FakeRunner("reference", [2.0, 4.0, 3.0], [0.1, 0.1, 0.6], log)
    measured = harness.Measurements()
    measured.add_pipeline("c4jax", 25, {"c4jax self-play": 9.0})
    measured.add_pipeline("reference", 285, {"reference self-play": 8.0})
    after = []
    harness.alternate([ours, theirs], 3, measured, after_repeat=after.append)
    assert log == [
        ("c4jax", "play", 0), ("reference", "play", 0),
        ("c4jax", "learn", 0), ("reference", "learn", 0),
        ("reference", "play", 1), ("c4jax", "play", 1),
        ("reference", "learn", 1), ("c4jax", "learn", 1),
        ("c4jax", "play", 2), ("reference", "play", 2),
        ("c4jax", "learn", 2), ("reference", "learn", 2),
    ]
    assert after == [0, 1, 2]
    out = measured.as_dict()
    assert set(out) == {"times", "cpu_times", "positions_with_targets", "node_bytes", "compile_s"}
    assert out["times"]["c4jax self-play"] == [1.0, 2.0, 3.0]
    assert out["cpu_times"]["reference self-play"] == [4.0, 8.0, 6.0]
    assert out["times"]["reference sgd"] == [0.1, 0.1, 0.6]
    assert out["positions_with_targets"] == {"c4jax": [0, 1, 2], "reference": [0, 1, 2]}
    assert out["node_bytes"] == {"c4jax": 25, "reference": 285}
    assert out["compile_s"] == {"c4jax self-play": 9.0, "reference self-play": 8.0}
    assert "xla_flags" not in out
    assert harness.Measurements(xla_flags={"c4jax": "x"}).as_dict()["xla_flags"] == {"c4jax": "x"}


def _config(batch=8, steps=2, sgd_steps=4, minibatch=16, sims=3):
    return types.SimpleNamespace(
        network=types.SimpleNamespace(num_blocks=1, channels=8),
        search=types.SimpleNamespace(algorithm="gumbel", num_simulations=sims),
        train=types.SimpleNamespace(
            selfplay_batch=batch, selfplay_steps=steps, sgd_steps=sgd_steps,
            minibatch_size=minibatch,
        ),
    )


def test_summary_uses_medians_and_paired_ratios(capsys):
    measured = {
        "times": {
            "c4jax self-play": [1.0, 2.0, 4.0],
            "reference self-play": [2.0, 3.0, 4.0],  # paired ratios 2, 1.5, 1
            "c4jax sgd": [1.0, 1.0, 1.0],
            "reference sgd": [1.0, 2.0, 0.5],
            "network floor": [0.5, 0.25, 1.0],
        },
        "cpu_times": {
            "c4jax self-play": [1.0, 1.0, 1.0],
            "reference self-play": [3.0, 3.0, 3.0],
            "c4jax sgd": [1.0, 1.0, 1.0],
            "reference sgd": [1.0, 1.0, 1.0],
        },
        "positions_with_targets": {"c4jax": [16, 16, 16], "reference": [8, 4, 6]},
        "node_bytes": {"c4jax": 25, "reference": 285},
        "compile_s": {},
    }
    summary = harness.summarize(_config(), measured)
    ours, theirs = summary["pipelines"]["c4jax"], summary["pipelines"]["reference"]
    assert ours["selfplay_s"] == 2.0 and theirs["selfplay_s"] == 3.0  # medians
    assert ours["selfplay_positions_per_s"] == 8 * 2 / 2.0
    assert ours["train_samples_per_s"] == 4 * 16 / 1.0
    assert ours["iteration_s"] == 3.0 and theirs["iteration_s"] == 4.0
    assert theirs["positions_with_targets_per_chunk"] == 6 and theirs["node_bytes"] == 285
    ratio = summary["ratio_c4jax_over_reference"]
    assert ratio["selfplay_positions_per_s"] == pytest.approx(1.5)
    assert ratio["iteration"] == pytest.approx(4.0 / 3.0)
    assert ratio["paired_median"] == {
        "selfplay_wall": 1.5, "sgd_wall": 1.0, "selfplay_cpu": 3.0, "sgd_cpu": 1.0}
    assert summary["network_floor"] == {
        "seconds": 0.5, "positions_per_s": 32.0, "forward_passes": 2 * 4}
    assert "c4jax_fused_iteration_s" not in summary
    harness.print_table(_config(), summary, 3)
    printed = capsys.readouterr().out
    assert "c4jax/ref" in printed and "median of 3" in printed and "network alone" in printed


def test_result_record_holds_the_raw_times_and_the_definitions():
    measured = {"times": {"a": [1.0]}, "cpu_times": {"a": [2.0]}, "compile_s": {"a": 3.0}}
    record = harness.result_record(
        measured, {"pipelines": {}}, device={"platform": "cpu"},
        load_average=((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)), command="python -m x",
        wall_s=7.0, settings={"repeats": 1},
    )
    assert record["times_s"] == {"a": [1.0]} and record["cpu_times_s"] == {"a": [2.0]}
    assert record["compile_s"] == {"a": 3.0} and record["settings"] == {"repeats": 1}
    assert record["load_average"] == {"start": [1.0, 2.0, 3.0], "end": [4.0, 5.0, 6.0]}
    assert "selfplay_positions_per_s" in record["definitions"]
    json.dumps(record)
