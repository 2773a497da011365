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
