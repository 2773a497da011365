"""The benchmark environment's machine description: two VMs that both call
themselves "AMD EPYC" are told apart by family, model and vector extensions; the
command a result records is one a shell takes back."""

import argparse
import shlex

import pytest

from bench import bench_env

_FAMILY23_VM = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma
cache size\t: 512 KB

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: another name
flags\t\t: avx512f
"""


def test_a_vm_that_names_only_the_vendor_line_is_told_apart():
    assert bench_env.cpu_model(_FAMILY23_VM) == "AMD EPYC (family 23 model 1, AVX2)"
    zen4 = _FAMILY23_VM.replace("23", "25").replace("model\t\t: 1", "model\t\t: 17").replace(
        "avx2 fma", "avx2 avx512f fma")
    assert bench_env.cpu_model(zen4) == "AMD EPYC (family 25 model 17, AVX-512)"
    xeon = ("cpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\n"
            "flags\t\t: avx2 avx512f amx_tile amx_bf16\n")
    assert bench_env.cpu_model(xeon) == (
        "Intel(R) Xeon(R) Platinum 8481C (family 6 model 143, AVX-512, AMX)")


def test_a_cpuinfo_without_details_gives_the_name_alone():
    assert bench_env.cpu_model("model name\t: Some CPU\n") == "Some CPU"
    assert bench_env.cpu_model("processor\t: 0\n") == (bench_env.platform.processor() or None)


def test_every_benchmark_record_names_the_cpu_model():
    info = bench_env.device_info(("mctx",))
    assert info["cpu_model"] == bench_env.cpu_model()
    assert info["cpu_count"] >= 1 and "mctx_version" in info
    # the CPUs the process may use (taskset pins a benchmark to fewer)
    assert info["usable_cpus"] == len(bench_env.os.sched_getaffinity(0))
    assert 1 <= info["usable_cpus"] <= info["cpu_count"]


def test_the_recorded_command_survives_being_pasted_into_a_shell():
    """An empty argument (a time budget turned off) or one with spaces must come back
    as the same argv, or the command in a result file repeats another run."""
    argv = ["--workdir", "runs/a b", "--", "--train.time-budget", "", "--seed", "1"]
    line = bench_env.command_line("bench.time_to_strength", argv)
    assert line.startswith("python -m bench.time_to_strength ")
    assert shlex.split(line) == ["python", "-m", "bench.time_to_strength", *argv]


def test_at_least_takes_whole_numbers_from_its_bound():
    positive = bench_env.at_least(1)
    assert positive("1") == 1 and positive("1000") == 1000
    for bad in ("0", "-5", "x", "1.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=r"allowed: a whole number >= 1"):
            positive(bad)


@pytest.mark.parametrize("argv, said", [
    # -4 was a TypeError from inside XLA; 0 rows of 0 steps/s.
    (["--batch-sizes", "64", "-4"], "argument --batch-sizes: got '-4', allowed: a whole number"),
    (["--batch-sizes", "0"], "argument --batch-sizes: got '0'"),
    (["--steps", "0"], "argument --steps: got '0'"),  # silently calibrated instead
    (["--seconds", "0"], "argument --seconds: got '0', allowed: a number of seconds > 0"),
    (["--seconds", "nan"], "argument --seconds: got 'nan'"),
])
def test_sizes_and_times_below_one_are_refused(argv, said, usage_error):
    assert said in usage_error(bench_env.parse_args, argv)


def test_the_default_output_is_named_by_the_platform(tmp_path, monkeypatch):
    """Every run wrote env_cpu.json, a GPU's results over the CPU's under a CPU name."""
    monkeypatch.setattr(bench_env, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(bench_env, "device_info",
                        lambda *a, **k: {"platform": "gpu", "device_kind": "H200",
                                         "cpu_count": 2, "jax_version": "0"})
    monkeypatch.setattr(bench_env, "time_envs", lambda adapters, *a: {
        ad.name: {"best": 1.0, "median": 1.0, "steps": 1} for ad in adapters})
    bench_env.main(["--batch-sizes", "1", "--skip-pgx", "--repeats", "1"])
    assert [p.name for p in tmp_path.iterdir()] == ["env_gpu.json"]
