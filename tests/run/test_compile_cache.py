"""JAX's persistent compilation cache for the command lines: on by default in a
documented folder, read back by a second process, and never in the way."""

import os
import subprocess
import sys
import zlib
from pathlib import Path

import jax
import pytest
from faults import fill, small_fs

from c4jax.run import compile_cache

ROOT = Path(__file__).resolve().parents[2]

# A process that turns the cache on as the commands do, compiles one program and
# reports what enable() said and how many compiled programs it read from the cache.
PROGRAM = r"""
import jax, jax.numpy as jnp
from jax import monitoring
from c4jax.run import compile_cache
hits = []
monitoring.register_event_listener(
    lambda name, **kw: hits.append(name) if name == "/jax/compilation_cache/cache_hits" else None)
print(compile_cache.enable())
jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((64, 64))).block_until_ready()
print("hits", len(hits))
print(compile_cache.describe())
"""


def _run(tmp_path, stderr: list | None = None, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    environ.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", **env)
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         env=environ, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    if stderr is not None:
        stderr.append(out.stderr)
    return out.stdout.splitlines()


@pytest.mark.slow
def test_a_second_process_reads_what_the_first_compiled(tmp_path):
    folder = tmp_path / "c4jax" / "jax"
    said, hits, line = _run(tmp_path)
    assert said == f"on: {folder}" and hits == "hits 0"
    assert any(folder.iterdir()) and line.startswith(f"compilation cache: {folder}")
    assert any(p.name.startswith("jit__lambda-") for p in folder.iterdir())
    said, hits, _ = _run(tmp_path)
    assert said == f"on: {folder}" and int(hits.removeprefix("hits ")) >= 1  # every program


@pytest.mark.slow
def test_the_user_s_choices_win(tmp_path):
    theirs = tmp_path / "theirs"
    said, _, _ = _run(tmp_path, JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert said == f"set by the user: {theirs}" and any(theirs.iterdir())
    assert not (tmp_path / "c4jax").exists()
    said, hits, line = _run(tmp_path, C4JAX_COMPILE_CACHE="0")
    assert said == "opted out" and line == "compilation cache: off (C4JAX_COMPILE_CACHE=0)"
    assert not (tmp_path / "c4jax").exists()


@pytest.mark.slow
def test_a_read_only_folder_leaves_the_cache_off_and_the_program_runs(tmp_path):
    with small_fs(tmp_path / "ro", "256k", read_only=True) as disk:
        said, hits, line = _run(disk)
    assert said.startswith(f"off: {disk / 'c4jax' / 'jax'} is not writable")
    assert line.startswith("compilation cache: off (") and hits == "hits 0"


@pytest.mark.slow
def test_a_full_disk_only_costs_the_cache_and_the_next_start_repairs_it(tmp_path):
    with small_fs(tmp_path / "full", "256k") as disk:
        folder = disk / "c4jax" / "jax"
        folder.mkdir(parents=True)
        fill(disk)
        said, hits, _ = _run(disk)  # the program ran and exited 0: JAX only warned
        assert said == f"on: {folder}" and hits == "hits 0"
        # JAX created each entry, then could not write it: empty, and no access time.
        cut = [p for p in folder.glob("*-cache") if p.stat().st_size == 0]
        assert cut and not any(folder.glob("*-atime"))
        (disk / "filler").unlink()  # space again
        errors = []
        said, hits, line = _run(disk, errors)
        removed = f"removed {len(cut)} damaged entr{'y' if len(cut) == 1 else 'ies'}"
        assert said == f"on: {folder}; {removed} cut short or corrupt"
        assert line.endswith(f"{removed} cut short or corrupt)")
        assert hits == "hits 0" and "Error" not in errors[0], errors[0][-2000:]
        said, hits, _ = _run(disk, errors)  # written whole this time, and read back
        assert said == f"on: {folder}" and "Error" not in errors[1], errors[1][-2000:]
        assert int(hits.removeprefix("hits ")) >= 1


def _entry(folder, name, data, *, atime=True):
    (folder / f"{name}-cache").write_bytes(data)
    if atime:
        (folder / f"{name}-atime").write_bytes((1).to_bytes(8, "little"))


def test_repair_removes_what_a_killed_write_cut_short_and_keeps_the_rest(tmp_path):
    whole = zlib.compress(b"a compiled program" * 100)
    _entry(tmp_path, "sound", whole)
    _entry(tmp_path, "killed", whole[:len(whole) // 2], atime=False)  # killed mid-write
    _entry(tmp_path, "read_after", whole[:10])  # a reader gave it an access time
    _entry(tmp_path, "flipped", whole[:-1] + bytes([whole[-1] ^ 1]))  # a bad checksum
    _entry(tmp_path, "unbounded", whole, atime=False)  # written while the cache was unbounded
    assert compile_cache.repair(tmp_path, bounded=True) == 3
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert left == ["sound-atime", "sound-cache", "unbounded-atime", "unbounded-cache"]
    # Only what is new since the last repair is read again: the check costs little.
    old = tmp_path / "sound-cache"
    old.write_bytes(whole[:5])
    os.utime(old, ns=(0, 0))
    assert compile_cache.repair(tmp_path, bounded=True) == 0 and old.exists()
    _entry(tmp_path, "new", whole[:5])
    assert compile_cache.repair(tmp_path, bounded=True) == 1
    assert not (tmp_path / "new-cache").exists() and not (tmp_path / "new-atime").exists()


def test_repair_of_an_unbounded_cache_writes_no_access_times(tmp_path):
    whole = zlib.compress(b"x" * 1000)
    _entry(tmp_path, "sound", whole, atime=False)
    _entry(tmp_path, "cut", whole[:3], atime=False)
    assert compile_cache.repair(tmp_path, bounded=False) == 1
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "sound-cache"]
    # Checked once: the next repair reads only what is new, as for a bounded cache.
    (tmp_path / "sound-cache").write_bytes(whole[:3])
    os.utime(tmp_path / "sound-cache", ns=(0, 0))
    _entry(tmp_path, "new", whole[:3], atime=False)
    assert compile_cache.repair(tmp_path, bounded=False) == 1
    assert (tmp_path / "sound-cache").exists() and not (tmp_path / "new-cache").exists()
    assert compile_cache.repair(tmp_path / "none", bounded=True) == 0  # no folder yet
    assert compile_cache.repair("gs://bucket/jax", bounded=True) == 0  # not ours to read


def test_a_folder_in_the_way_is_reported_not_raised(tmp_path):
    (tmp_path / "file").write_text("")
    chosen = jax.config.jax_compilation_cache_dir  # the suite's (conftest)
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        said = compile_cache.enable(environ={}, folder=tmp_path / "file" / "jax")
        assert jax.config.jax_compilation_cache_dir is None
    finally:
        jax.config.update("jax_compilation_cache_dir", chosen)
    assert said.startswith(f"off: {tmp_path / 'file' / 'jax'} is not writable")


def test_the_default_folder_follows_xdg(tmp_path):
    folder = compile_cache.default_dir({"XDG_CACHE_HOME": str(tmp_path)})
    assert folder == tmp_path / "c4jax" / "jax"
    assert compile_cache.default_dir({}) == Path.home() / ".cache" / "c4jax" / "jax"


def test_in_this_test_process_the_suite_s_cache_is_the_user_s():
    # conftest chose the suite's own folder: enable() must leave it, not replace it.
    before = jax.config.jax_compilation_cache_dir
    assert compile_cache.enable(environ={}) == f"set by the user: {before}"
    assert jax.config.jax_compilation_cache_dir == before
