"""Traced programs kept on disk: read back instead of traced, keyed by all they
depend on, and a damaged or unwritable file costs only a trace."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from faults import fill, small_fs

from c4jax.alphazero import config as config_lib
from c4jax.alphazero import trainer
from c4jax.store import programs


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(programs, "_folder", None)
    programs.enable(tmp_path / "programs")
    return tmp_path / "programs"


def _tiny(**train):
    cfg = config_lib.load("tiny")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **train))


def _two_iterations(run: trainer.Trainer):
    state = run.init(jax.random.key(0))
    for step in range(2):
        state, metrics = run.iteration(state, trainer.iteration_key(0, step))
    return jax.device_get((state, metrics))


def test_a_second_trainer_reads_the_iteration_back_without_tracing_it(store, monkeypatch):
    first = trainer.Trainer(_tiny(), jit=programs.stored_jit)
    traced = _two_iterations(first)
    assert first.iteration.jitted.source == "traced"
    assert [p.suffix for p in store.iterdir()] == [".jaxprog"]

    def untraceable(self, *args):
        raise AssertionError("traced again")

    monkeypatch.setattr(trainer.Trainer, "_iteration", untraceable)
    second = trainer.Trainer(_tiny(), jit=programs.stored_jit)
    stored = _two_iterations(second)
    assert second.iteration.jitted.source == "stored"
    chex.assert_trees_all_equal(stored, traced)
    assert int(stored[0].step) == 2 and float(stored[1]["loss"]) > 0


def test_the_stored_program_computes_what_jax_jit_does(store):
    stored = _two_iterations(trainer.Trainer(_tiny(), jit=programs.stored_jit))
    plain = _two_iterations(trainer.Trainer(_tiny()))
    chex.assert_trees_all_close(stored, plain, rtol=1e-5, atol=1e-6)


def test_each_program_has_its_own_file_but_a_seed_or_length_does_not_count(store):
    run = trainer.Trainer(_tiny(), jit=programs.stored_jit)
    run.iteration.lower(run.abstract_state(), jax.random.key(0))
    trainer.Trainer(_tiny(num_iterations=9), jit=programs.stored_jit).iteration.lower(
        run.abstract_state(), jax.random.key(0))
    assert len(list(store.iterdir())) == 1  # the run's length is an argument
    other = trainer.Trainer(_tiny(sgd_steps=3), jit=programs.stored_jit)
    other.iteration.lower(other.abstract_state(), jax.random.key(0))
    assert len(list(store.iterdir())) == 2 and other.iteration.jitted.source == "traced"


def test_a_damaged_file_is_traced_again_and_replaced(store):
    traced = _two_iterations(trainer.Trainer(_tiny(), jit=programs.stored_jit))
    [path] = store.iterdir()
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x10  # one flipped bit
    path.write_bytes(bytes(blob))
    again = trainer.Trainer(_tiny(), jit=programs.stored_jit)
    with pytest.warns(UserWarning, match="damaged"):
        redone = _two_iterations(again)
    assert again.iteration.jitted.source == "traced"
    chex.assert_trees_all_equal(redone, traced)
    assert path.read_bytes() != bytes(blob)  # replaced by a sound one
    third = trainer.Trainer(_tiny(), jit=programs.stored_jit)
    _two_iterations(third)
    assert third.iteration.jitted.source == "stored"


def test_a_full_disk_costs_only_the_next_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(programs, "_folder", None)
    with small_fs(tmp_path / "full", "256k") as disk:
        programs.enable(disk / "programs")
        (disk / "programs").mkdir()
        fill(disk)
        run = trainer.Trainer(_tiny(), jit=programs.stored_jit)
        with pytest.warns(UserWarning, match="not saved"):
            state, _ = _two_iterations(run)
        assert int(state.step) == 2 and not list((disk / "programs").iterdir())


def test_off_it_is_jax_jit_and_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(programs, "_folder", None)
    step = programs.stored_jit(lambda x: {"y": jnp.tanh(x)}, name="f", key="k")
    np.testing.assert_allclose(step(jnp.ones(3))["y"], np.tanh(np.ones(3)), rtol=1e-6)
    assert step.source == "traced" and programs.folder() is None


def test_a_plain_function_round_trips_through_the_store(store):
    def f(tree, scale):
        return {"sum": tree["a"] * scale + tree["b"].sum()}, scale

    args = ({"a": jnp.arange(3.0), "b": jnp.ones((2, 2))}, jnp.float32(2))
    first = programs.stored_jit(f, name="f", key="k")
    out = first(*jax.tree.map(jnp.copy, args))
    second = programs.stored_jit(f, name="f", key="k")
    again = second(*args)
    assert (first.source, second.source) == ("traced", "stored")
    chex.assert_trees_all_equal(out, again)
    np.testing.assert_array_equal(again[0]["sum"], [4.0, 6.0, 8.0])
    with pytest.raises(TypeError, match="static_argnums"):
        programs.stored_jit(f, name="g", key="k", static_argnums=1)(*args)
