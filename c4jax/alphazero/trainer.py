"""The fused training iteration and the state it carries, sharded over devices.

``iteration(train_state, key)`` self-plays a chunk of B games for T moves,
adds the finished positions to the on-device replay buffer and takes K SGD
steps in ``lax.scan``; it returns the new state and a dict of metrics. Nothing
in it syncs with the host.

Data parallelism: a 1-D ``Mesh`` with a ``data`` axis over all devices. The
game batch, the replay buffer and each minibatch are split along it; the
network and optimizer state are replicated. One device is the 1-device case.
Each device samples its share of every minibatch from its own rows of the
buffer (``replay.sample_shard`` in ``shard_map``), so an SGD step moves no
buffer data between devices: its only collectives are the all-reduces of the
gradients and metrics.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from c4jax import replay
from c4jax.alphazero import learner, network, search, selfplay
from c4jax.alphazero.config import Config, EvalConfig

DATA_AXIS = "data"


@struct.dataclass
class TrainState:
    """All that a run needs to continue bit-for-bit."""

    step: jax.Array  # [] int32 iterations done
    learner: learner.LearnerState
    best: dict  # network variables that self-play uses under gating (else unused)
    replay: replay.ReplayBuffer
    selfplay: selfplay.SelfPlayState


def make_mesh(devices: list | None = None) -> Mesh:
    """A 1-D mesh with axis ``data`` over ``devices`` (default: all devices)."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def run_keys(seed: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The three independent key streams of a run: (init, iterations, evaluation)."""
    init_key, iteration_root, eval_root = jax.random.split(jax.random.key(seed), 3)
    return init_key, iteration_root, eval_root


def iteration_key(seed: int, step: int | jax.Array) -> jax.Array:
    """The PRNG key of iteration ``step``: a pure function of the seed and step,
    so a resumed run draws exactly the keys an uninterrupted one would."""
    return jax.random.fold_in(run_keys(seed)[1], step)


class Trainer:
    """Builds the pure functions of a run and their jitted, sharded forms.

    Attributes:
        config: the run's configuration.
        mesh: the device mesh.
        network: the Flax module.
        apply_fn: ``apply_fn(variables, obs [B, H, W, 2]) -> (logits [B, A], value [B])``.
        search_fn: the run's search, ``search_fn(variables, key, state[B])``;
            self-play wraps it when ``train.opening_search_games`` > 0.
        init: jitted ``init(key) -> TrainState``, sharded.
        iteration: ``iteration(TrainState, key) -> (TrainState, metrics)``, the
            jitted ``iteration.jitted(TrainState, key, num_iterations)`` with the
            config's ``train.num_iterations`` (an [] int32 argument, not a constant:
            the learning-rate schedule spans it, and one compiled program serves
            every run length); ``lower`` and ``trace`` take ``(state, key)`` too.
            It donates its input state. It composes the public pure pieces
            ``selfplay_chunk`` and ``learn`` (which benchmarks time one by one).
        shardings: the ``TrainState`` pytree of ``NamedSharding``.
        replay_shards: S, the replay buffer's layout (``replay``): the device
            count when the capacity divides by it, else 1 (then the buffer is
            replicated).
        to_checkpoint, from_checkpoint: the state with its replay buffer in
            slot order (as checkpoints keep it), and back; the identity when S = 1.
    """

    def __init__(self, config: Config, mesh: Mesh | None = None, *,
                 batched_leaves: bool = True):
        """``batched_leaves``: ``search.make_search``'s (False leaves every search to
        mctx, the same search, slower: for ``bench.bench_leaves``)."""
        self.config = config
        self.mesh = mesh if mesh is not None else make_mesh()
        # The K SGD steps run in a lax.scan. XLA:CPU computes JAX's convolution
        # gradients ~25x slower inside a loop (c4jax.alphazero.conv), so on the CPU
        # the network takes them as forward-layout convolutions; written out step
        # by step instead, the program took minutes to compile and ~30 s to load.
        on_cpu = self.mesh.devices.flat[0].platform == "cpu"
        self.network = network.make_network(config.network, loop_grads=on_cpu)
        self.apply_fn = network.make_apply_fn(self.network)
        make_search = functools.partial(search.make_search, batched_leaves=batched_leaves)
        self.search_fn = make_search(self.apply_fn, config.search)
        # The schedule's length is an argument of the step; the state's structure
        # does not depend on it (``init`` below).
        self.optimizer = learner.make_optimizer(
            config.train, config.train.num_iterations * config.train.sgd_steps)
        self._make_search = make_search
        self._selfplay = self.make_selfplay(self.apply_fn)
        abstract = jax.eval_shape(self._init, jax.random.key(0))
        num_devices = self.mesh.devices.size
        capacity = config.train.replay_capacity
        self.replay_shards = num_devices if capacity % num_devices == 0 else 1
        self.shardings = self._make_shardings(abstract)
        replicated = NamedSharding(self.mesh, P())
        self.init = jax.jit(self._init, out_shardings=self.shardings)
        self.iteration = CountedIteration(jax.jit(
            self._iteration,
            in_shardings=(self.shardings, replicated, replicated),
            out_shardings=(self.shardings, replicated),
            donate_argnums=0,
        ), config.train.num_iterations)
        self.to_checkpoint = self._relayout(replay.to_slot_order)
        self.from_checkpoint = self._relayout(replay.from_slot_order)

    def abstract_state(self) -> TrainState:
        """Shapes, dtypes and shardings of the state, for checkpoint restore."""
        abstract = jax.eval_shape(self._init, jax.random.key(0))
        return jax.tree.map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
            abstract,
            self.shardings,
        )

    def _relayout(self, convert):
        """A jitted ``state -> state`` applying ``convert`` to the replay buffer."""
        if self.replay_shards == 1:
            return lambda state: state
        shards = self.replay_shards
        return jax.jit(
            lambda state: state.replace(replay=convert(state.replay, shards)),
            out_shardings=self.shardings,
        )

    @staticmethod
    def variables(state: TrainState) -> dict[str, Any]:
        """The network variables in a state, for ``apply_fn`` and agents."""
        return {"params": state.learner.params, "batch_stats": state.learner.batch_stats}

    @staticmethod
    def promote(state: TrainState) -> TrainState:
        """The state with the current network as the best (fresh buffers, so
        that donating the state never donates one buffer twice)."""
        return state.replace(best=jax.tree.map(jnp.copy, Trainer.variables(state)))

    # -- pure functions -----------------------------------------------------

    def _init(self, key: jax.Array) -> TrainState:
        variables = network.init_variables(self.network, key)
        params = variables["params"]
        learner_state = learner.LearnerState(
            params=params,
            batch_stats=variables["batch_stats"],
            opt_state=self.optimizer.init(params),
            lr_scale=jnp.float32(1.0),
        )
        t = self.config.train
        return TrainState(
            step=jnp.int32(0),
            learner=learner_state,
            best=jax.tree.map(jnp.copy, variables),
            replay=replay.init(t.replay_capacity, next_policy=self.config.network.opponent_head,
                               weight=t.policy_surprise_weight > 0,
                               final_board=self.config.network.final_board_head),
            selfplay=selfplay.init(
                t.selfplay_batch, surprise=t.policy_surprise_weight > 0 or t.surprise_starts > 0,
                pool=t.surprise_pool if t.surprise_starts > 0 else 0,
                final_board=self.config.network.final_board_head),
        )

    def make_selfplay(self, apply_fn):
        """The self-play function of this run's settings around ``apply_fn``: the
        run's own network (``self.apply_fn``), or a stand-in one (a benchmark's).

        Returns:
            ``selfplay.make_selfplay``'s function ``(variables, key, games) ->
            (games, positions, ready, metrics)``.
        """
        config, make_search = self.config, self._make_search
        search_fn = make_search(apply_fn, config.search)
        selfplay_search = search_fn
        if config.train.opening_search_games:  # the games nearest their start search more
            selfplay_search = search.make_opening_search(
                search_fn,
                make_search(apply_fn, dataclasses.replace(
                    config.search, num_simulations=config.train.opening_search_simulations)),
                games=config.train.opening_search_games,
            )
        return selfplay.make_selfplay(
            selfplay_search,
            num_steps=config.train.selfplay_steps,
            random_opening_moves=config.train.random_opening_moves,
            value_target_q=config.train.value_target_q,
            value_target_lambda=config.train.value_target_lambda,
            value_length_shaping=config.train.value_length_shaping,
            opening_targets=config.train.opening_targets,
            evaluate_fn=search.make_evaluate(apply_fn),
            fast_search_fn=make_search(
                apply_fn,
                dataclasses.replace(
                    config.search, num_simulations=config.train.fast_search_simulations
                ),
            ),
            full_search_fraction=config.train.full_search_fraction,
            next_policy_targets=config.network.opponent_head,
            final_board_targets=config.network.final_board_head,
            policy_surprise_weight=config.train.policy_surprise_weight,
            surprise_starts=config.train.surprise_starts,
            surprise_start_moves=config.train.surprise_start_moves,
        )

    def selfplay_chunk(
        self,
        variables: dict,
        key: jax.Array,
        games: selfplay.SelfPlayState,
        buffer: replay.ReplayBuffer,
    ) -> tuple[selfplay.SelfPlayState, replay.ReplayBuffer, dict]:
        """Self-plays B games for T moves and adds the finished positions to ``buffer``.

        The first part of ``iteration``; pure and traceable (benchmarks jit it alone).

        Returns:
            ``(games, buffer, metrics)``: the games to continue, the buffer with
            the new positions, self-play metrics ([] arrays).
        """
        games, positions, ready, metrics = self._selfplay(variables, key, games)
        return games, replay.add(buffer, positions, ready, shards=self.replay_shards), metrics

    def _sgd_step(self, learner_state: learner.LearnerState, batch: replay.Minibatch,
                  total_steps: jax.Array) -> tuple[learner.LearnerState, dict]:
        """One SGD step, its learning-rate schedule spanning ``total_steps`` ([] int32)."""
        t = self.config.train
        optimizer = learner.make_optimizer(t, total_steps)
        return learner.make_sgd_step(self.network, optimizer, t)(learner_state, batch)

    def ready_to_learn(self, size: jax.Array) -> jax.Array:
        """[] bool: whether a buffer of ``size`` positions is one to learn from: it
        holds ``train.min_replay_size`` of them, and one in every replay shard (with
        S shards device d draws from its own rows: an empty shard's draws would be
        rows never written, empty boards valued 0)."""
        return size >= max(self.config.train.min_replay_size, self.replay_shards)

    def learn(
        self, learner_state: learner.LearnerState, buffer: replay.ReplayBuffer, key: jax.Array,
        num_iterations: int | jax.Array | None = None, window: jax.Array | None = None,
    ) -> tuple[learner.LearnerState, dict]:
        """K SGD steps on minibatches sampled from ``buffer``: the second part of ``iteration``.

        Pure and traceable. Metrics are the means over the K steps ([] arrays).
        ``num_iterations`` ([] int32, default the config's) is the run's length, which
        the learning-rate schedule spans. ``window`` ([] int32, default the whole
        buffer) limits the draws to the newest positions (``replay.sample``);
        ``train.endgame_sample_weight`` < 1 draws endgame positions less often.
        With S > 1 replay shards, device d draws its B / S examples from its
        own rows with the key ``fold_in(sgd_key, d)``; with one, the whole
        minibatch is drawn with ``sgd_key`` itself.
        """
        t = self.config.train
        if num_iterations is None:
            num_iterations = t.num_iterations
        total_steps = jnp.asarray(num_iterations, jnp.int32) * t.sgd_steps
        batch_sharding = NamedSharding(self.mesh, P(DATA_AXIS))
        shards = self.replay_shards
        endgame = ((t.endgame_stones, t.endgame_sample_weight)
                   if t.endgame_sample_weight < 1 else None)

        def sample_shard(data, size, insert, window, key):  # one device's rows -> its part
            shard = jax.lax.axis_index(DATA_AXIS)
            return replay.sample_shard(
                data, size, shard, shards, jax.random.fold_in(key, shard),
                t.minibatch_size // shards, mirror=t.mirror_augment,
                insert=None if window is None else insert, window=window, endgame=endgame,
            )

        sample_local = jax.shard_map(
            sample_shard, mesh=self.mesh, in_specs=(P(DATA_AXIS), P(), P(), P(), P()),
            out_specs=P(DATA_AXIS),
        )

        def sgd(learner_state, sgd_key, buffer, total_steps):
            if shards > 1:
                batch = sample_local(buffer.data, buffer.size, buffer.insert, window, sgd_key)
            else:
                batch = replay.sample(buffer, sgd_key, t.minibatch_size, mirror=t.mirror_augment,
                                      window=window, endgame=endgame)
                batch = jax.lax.with_sharding_constraint(batch, batch_sharding)
            return self._sgd_step(learner_state, batch, total_steps)

        keys = jax.random.split(key, t.sgd_steps)
        learned, metrics = jax.lax.scan(
            lambda s, k: sgd(s, k, buffer, total_steps), learner_state, keys)
        return learned, jax.tree.map(jnp.mean, metrics)

    def _iteration(self, state: TrainState, key: jax.Array, num_iterations: jax.Array):
        t = self.config.train
        play_key, learn_key = jax.random.split(key)
        players = state.best if self.config.eval.gating else self.variables(state)
        sp_state, buffer, sp_metrics = self.selfplay_chunk(
            players, play_key, state.selfplay, state.replay
        )
        window = None
        if t.replay_window:  # positions searched so far, this chunk's included
            # In float32: int32 wraps around from 2**31 positions (iteration
            # 32768 of the tpu preset's B * T = 65536).
            searched = (state.step.astype(jnp.float32) + 1.0) * float(
                t.selfplay_batch * t.selfplay_steps)
            window = replay.window_size(searched, t.replay_window, t.replay_window_power)
        learned, learn_metrics = self.learn(state.learner, buffer, learn_key, num_iterations,
                                            window)
        # A select, not lax.cond: XLA:CPU is slow on gradients inside a cond
        # branch too. Only the first iterations, before any game ends, discard.
        ready_to_learn = self.ready_to_learn(buffer.size)
        learner_state = jax.tree.map(
            lambda new, old: jnp.where(ready_to_learn, new, old), learned, state.learner
        )
        learn_metrics = jax.tree.map(lambda m: m * ready_to_learn, learn_metrics)
        # The rate of this iteration's first SGD step: the schedule counts the steps
        # taken, which iterations that did not learn leave behind state.step * sgd_steps.
        sgd_done = learner.schedule_count(state.learner.opt_state)
        metrics = {
            **sp_metrics,
            **learn_metrics,
            "learning_rate": learner.make_schedule(t, num_iterations * t.sgd_steps)(sgd_done)
            * learner_state.lr_scale,
            "replay_size": buffer.size,
            "learned": ready_to_learn,
            # 1.0 while every parameter is finite: the host's NaN guard reads it.
            "params_finite": jnp.all(
                jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(learner_state.params)])
            ).astype(jnp.float32),
        }
        new_state = TrainState(
            step=state.step + 1,
            learner=learner_state,
            best=state.best,
            replay=buffer,
            selfplay=sp_state,
        )
        return new_state, metrics

    # -- sharding -------------------------------------------------------------

    def _make_shardings(self, abstract: TrainState) -> TrainState:
        mesh = self.mesh
        replicated = NamedSharding(mesh, P())
        batch = NamedSharding(mesh, P(DATA_AXIS))
        time_batch = NamedSharding(mesh, P(None, DATA_AXIS))
        num_devices = math.prod(mesh.devices.shape)
        rows = batch if abstract.replay.capacity % num_devices == 0 else replicated
        every = lambda tree, s: jax.tree.map(lambda _: s, tree)  # noqa: E731
        return TrainState(
            step=replicated,
            learner=every(abstract.learner, replicated),
            best=every(abstract.best, replicated),
            replay=replay.ReplayBuffer(
                data=every(abstract.replay.data, rows), insert=replicated, size=replicated
            ),
            selfplay=selfplay.SelfPlayState(
                games=every(abstract.selfplay.games, batch),
                tail=every(abstract.selfplay.tail, time_batch),
                opening=batch,
                pool=every(abstract.selfplay.pool, replicated),
            ),
        )


def shared_trainer(config: Config) -> Trainer:
    """``Trainer(config)`` on the default mesh, its jitted programs shared in this process
    with the earlier trainers of configs that build the same programs.

    The programs depend on the network, search and training sections, whether
    gating is on, and the devices; not on the seed (keys are arguments), the run's
    length (``train.num_iterations`` is an argument of the iteration, and
    ``train.time_budget`` only chooses it), the rest of the evaluation section or
    the checkpoint settings. So a second run in one process (a notebook, a test
    session, the run that a time budget measured) starts without tracing or
    compiling again. The returned trainer's ``config`` is ``config`` itself, and its
    ``iteration`` runs ``config.train.num_iterations`` long.
    """
    program = dataclasses.replace(
        config, seed=0, eval=EvalConfig(gating=config.eval.gating), checkpoint_every=1,
        keep_checkpoints=1,
        train=dataclasses.replace(config.train, num_iterations=1, time_budget=""),
    )
    shared = copy.copy(_trainer_of(program, tuple(jax.devices())))
    shared.config = config
    shared.iteration = CountedIteration(shared.iteration.jitted, config.train.num_iterations)
    return shared


class CountedIteration:
    """``iteration(state, key)``: the jitted ``jitted(state, key, num_iterations)``
    with the run's length given, as an [] int32 argument rather than a constant of
    the program (so that any length reuses one compiled program, in this process
    and in the persistent compilation cache)."""

    def __init__(self, jitted, num_iterations: int):
        self.jitted = jitted  # the jax.jit of Trainer._iteration
        self.num_iterations = num_iterations

    def _length(self) -> np.ndarray:
        return np.int32(self.num_iterations)

    def __call__(self, state: TrainState, key: jax.Array):
        return self.jitted(state, key, self._length())

    def lower(self, state, key):
        """``jax.jit(...).lower`` of the iteration, for ahead-of-time compiling."""
        return self.jitted.lower(state, key, self._length())

    def trace(self, state, key):
        """``jax.jit(...).trace`` of the iteration."""
        return self.jitted.trace(state, key, self._length())


@functools.lru_cache(maxsize=4)
def _trainer_of(program: Config, devices: tuple) -> Trainer:
    del devices  # the cache key: the default mesh spans them
    return Trainer(program)
