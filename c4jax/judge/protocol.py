"""What an agent is, how the arena and the solver call one, and the one jit cache.

An agent chooses a move in each of a batch of positions. There are two kinds:

* A **jittable agent** is any callable ``act(key, state[B]) -> [B] int32`` built
  from JAX operations (the baselines, the network with or without search). The
  arena compiles a whole match around it. Bind settings and arrays with
  ``functools.partial``: the arrays it binds (network variables, say) become
  arguments of the compiled function instead of constants, so a new partial
  with new arrays of the same shapes reuses the compiled code.
* A **host agent** is a ``HostAgent``: a function of the same signature that
  runs on the host (numpy, or native code such as a C++ solver) and cannot be
  traced. It receives ``state`` with numpy leaves and returns a numpy ``[B]``
  array. The arena plays matches with a host agent ply by ply from Python.

Either kind returns a legal column for every live game of the batch. Finished
games may appear in the batch (matches keep them in lockstep with live ones):
an agent returns any column 0..6 for them and must not fail.

Compiled matches (``arena``) and compiled agent calls (``batched_act``) share
one least-recently-used cache, ``cached_jit``.

Shapes: B batch of games.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Hashable
from typing import Any

import jax
import numpy as np

from c4jax import env

JaxAgent = Callable[[jax.Array, env.State], jax.Array]  # (key, state[B]) -> [B] int32


@dataclasses.dataclass(frozen=True)
class HostAgent:
    """An agent that runs on the host and is never traced or jitted.

    ``act(key, state[B]) -> [B]`` gets a JAX PRNG key (for its random choices,
    if any) and positions whose leaves are numpy arrays; it returns numpy (or
    anything ``np.asarray`` reads) int columns.
    """

    act: Callable[[jax.Array, env.State], np.ndarray]

    def __call__(self, key: jax.Array, state: env.State) -> np.ndarray:
        return self.act(key, state)


Agent = JaxAgent | HostAgent


def is_host(agent: Agent) -> bool:
    """True for a ``HostAgent`` (played from Python), False for a jittable agent."""
    return isinstance(agent, HostAgent)


# --- The one cache of compiled functions. ---

CACHE_SIZE = 64
_cache: collections.OrderedDict = collections.OrderedDict()


def cached_jit(key: Hashable, build: Callable[[], Callable]) -> Callable:
    """The compiled function cached under ``key``, built by ``build()`` on a miss.

    A least-recently-used cache of ``CACHE_SIZE`` entries shared by the arena's
    matches and the agent calls of ``batched_act``.
    """
    fn = _cache.get(key)
    if fn is None:
        fn = build()
        _cache[key] = fn
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return fn


# --- Splitting agents into a static part (cache key) and array arguments. ---


def _is_array(x: Any) -> bool:
    return isinstance(x, jax.Array | np.ndarray)


def split_agent(agent: Agent) -> tuple[Any, list]:
    """(hashable static description, list of array leaves) of an agent.

    A ``functools.partial`` is split into its function, the tree structure of
    its bound arguments with non-array leaves, and the array leaves. Any other
    callable is static as a whole.
    """
    if isinstance(agent, functools.partial):
        leaves, treedef = jax.tree.flatten((agent.args, agent.keywords))
        arrays = [x for x in leaves if _is_array(x)]
        statics = tuple(None if _is_array(x) else x for x in leaves)
        static = ("partial", agent.func, treedef, statics)
        try:
            hash(static)
        except TypeError:
            return ("object", agent), []
        return static, arrays
    return ("object", agent), []


def join_agent(static: Any, arrays: list) -> Agent:
    """Inverse of ``split_agent``."""
    if static[0] == "object":
        return static[1]
    _, func, treedef, statics = static
    it = iter(arrays)
    leaves = [next(it) if s is None else s for s in statics]
    args, keywords = jax.tree.unflatten(treedef, leaves)
    return functools.partial(func, *args, **keywords)


# --- Calling an agent from the host. ---


def _build_act(static: Any) -> Callable:
    def act(key, state, arrays):
        return join_agent(static, arrays)(key, state)

    return jax.jit(act)


def batched_act(agent: Agent) -> Callable[[jax.Array, env.State], np.ndarray]:
    """``act(key, state[B]) -> [B] int32 numpy`` for either kind of agent.

    A jittable agent is compiled once per static part (see ``split_agent``)
    and gets its arrays as arguments; ``state`` may have numpy or jax leaves.
    A host agent gets ``state`` with numpy leaves.
    """
    if is_host(agent):

        def host_act(key, state):
            moves = agent(key, jax.tree.map(np.asarray, state))
            return np.asarray(moves).astype(np.int32)

        return host_act
    static, arrays = split_agent(agent)
    compiled = cached_jit(("act", static), functools.partial(_build_act, static))

    def jax_act(key, state):
        return np.asarray(compiled(key, jax.device_put(state), arrays)).astype(np.int32)

    return jax_act
