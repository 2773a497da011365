"""The agent protocol: splitting partials, the one jit cache, calling either kind."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from c4jax import baselines, env
from c4jax.judge import protocol


def _biased(bias, key, state):
    logits = jnp.where(env.legal_action_mask(state), bias, -jnp.inf)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def test_split_and_join_a_partial():
    agent = functools.partial(_biased, jnp.arange(7.0))
    static, arrays = protocol.split_agent(agent)
    assert len(arrays) == 1 and static[1] is _biased
    hash(static)
    joined = protocol.join_agent(static, arrays)
    assert joined.func is _biased and joined.args[0] is arrays[0]
    assert protocol.split_agent(baselines.random_agent) == (("object", baselines.random_agent), [])


def test_cached_jit_is_one_lru_cache():
    built = []

    def build(tag):
        built.append(tag)
        return tag

    assert protocol.cached_jit(("test", 1), lambda: build("a")) == "a"
    assert protocol.cached_jit(("test", 1), lambda: build("b")) == "a"  # a hit builds nothing
    assert built == ["a"]
    assert len(protocol._cache) <= protocol.CACHE_SIZE


def test_batched_act_calls_both_kinds_and_reuses_the_compiled_call():
    states = env.stack([env.from_moves(m) for m in ("", "111111", "4453")])
    # Start from an empty cache: one that earlier tests filled to CACHE_SIZE would
    # evict an entry for the new one and keep its length.
    protocol._cache.clear()
    before = len(protocol._cache)
    moves = [
        protocol.batched_act(functools.partial(_biased, bias))(jax.random.PRNGKey(0), states)
        for bias in (jnp.zeros(7), jnp.arange(7.0))
    ]
    assert len(protocol._cache) == before + 1  # new arrays, same compiled function
    for m in moves:
        assert isinstance(m, np.ndarray) and m.dtype == np.int32 and m.shape == (3,)

    def first_legal(key, state):
        assert isinstance(state.num_moves, np.ndarray)
        return np.argmax(np.asarray(env.legal_action_mask(state)), axis=-1)

    host = protocol.HostAgent(first_legal)
    assert protocol.is_host(host) and not protocol.is_host(baselines.random_agent)
    np.testing.assert_array_equal(
        protocol.batched_act(host)(jax.random.PRNGKey(0), states), [0, 1, 0]
    )
