"""Typed, frozen run configuration; presets live as JSON in ``configs/``.

Every field can be overridden from the command line (``c4jax.run.cli``). ``validate``
rejects impossible values with a message that names the field and what is
allowed, before anything is compiled.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

PRESET_DIR = Path(__file__).resolve().parent.parent / "configs"  # top-level configs/ links here


@dataclass(frozen=True)
class NetworkConfig:
    """The policy-value ResNet."""

    num_blocks: int = 5
    """Residual blocks."""
    channels: int = 64
    """Convolution channels in every block."""
    kernel_size: int = 3
    """Side of the square convolution kernels."""
    value_channels: int = 1
    """1x1 convolution channels of the value head, before its hidden dense layer
    (AlphaZero's 1; more give the value more of the board's features)."""
    bfloat16: bool = False
    """Compute in bfloat16 (parameters and outputs stay float32)."""


@dataclass(frozen=True)
class SearchConfig:
    """The mctx search used for self-play and evaluation."""

    algorithm: Literal["gumbel", "puct"] = "gumbel"
    """gumbel: mctx.gumbel_muzero_policy; puct: mctx.muzero_policy with Dirichlet noise."""
    num_simulations: int = 32
    """Simulations per move."""
    max_num_considered_actions: int = 7
    """Gumbel: actions sampled at the root (7 = all)."""
    gumbel_scale: float = 1.0
    """Gumbel: scale of the root Gumbel noise in self-play (0 in evaluation)."""
    gumbel_noise_moves: int = 42
    """Gumbel, in self-play: the root noise is on while fewer than this many
    stones are on the board, and off after, where self-play takes the search's
    best move (AlphaZero's temperature drop; random openings still vary the
    games). 42 = on for the whole game."""
    c_visit: float = 50.0
    """Gumbel: c_visit of the completed-Q transform, sigma(q) = (c_visit + max
    child visits) * c_scale * q (mctx's maxvisit_init)."""
    c_scale: float = 0.1
    """Gumbel: c_scale of the completed-Q transform (mctx's value_scale); larger
    makes the search follow Q-values over the network's prior sooner."""
    evaluation_move: Literal["halving", "policy", "q"] = "halving"
    """Gumbel, in evaluation: halving = mctx's pick among the last survivors of
    sequential halving; policy = argmax of the improved policy; q = argmax of the
    search's Q-values (unvisited moves valued at the root's search value)."""
    dirichlet_alpha: float = 0.3
    """PUCT: concentration of the root Dirichlet noise."""
    dirichlet_fraction: float = 0.25
    """PUCT: weight of the root Dirichlet noise."""
    pb_c_init: float = 1.25
    """PUCT: exploration constant."""
    temperature_moves: int = 10
    """PUCT: moves of each game played by sampling visit counts; later moves take the best."""


@dataclass(frozen=True)
class TrainConfig:
    """Self-play, replay and learning."""

    num_iterations: int = 100
    """Fused iterations (self-play chunk + SGD steps) to run."""
    selfplay_batch: int = 256
    """Games played in parallel (B); must divide by the device count."""
    selfplay_steps: int = 32
    """Moves each game advances per iteration (T)."""
    replay_capacity: int = 65536
    """Positions kept in the replay buffer."""
    minibatch_size: int = 256
    """Positions per SGD step; must divide by the device count."""
    sgd_steps: int = 32
    """SGD steps per iteration."""
    min_replay_size: int = 0
    """Positions in the buffer before learning starts (0 = learn as soon as any game ends)."""
    optimizer: Literal["adamw", "sgd"] = "adamw"
    """adamw (decoupled weight decay) or sgd with momentum 0.9 and L2 loss."""
    learning_rate: float = 1e-3
    """Peak learning rate."""
    warmup_steps: int = 100
    """Linear warm-up of the learning rate, in SGD steps."""
    lr_schedule: Literal["constant", "cosine", "onecycle"] = "cosine"
    """After warm-up: constant, or cosine decay to 10% at the last SGD step; or
    onecycle (no warm-up): up from 4% of the peak over the first 30% of the SGD
    steps, then down to ~0 at the last."""
    weight_decay: float = 1e-4
    """AdamW decay, or the L2 coefficient with sgd."""
    value_loss_weight: float = 1.0
    """Weight of the value MSE beside the policy cross-entropy."""
    kl_target: float = 0.0
    """KL-adaptive learning rate: target KL(before || after) per SGD step (0 = off)."""
    mirror_augment: bool = True
    """Mirror sampled positions left-right with probability 1/2."""
    random_opening_moves: int = 0
    """Each self-play game opens with k ~ U{0..this} uniformly random moves (0 = off);
    what positions up to the last random move teach is ``opening_targets``."""
    value_target_q: float = 0.0
    """Value target (1 - w) * game result + w * search value of the position (0 = result only)."""
    value_target_lambda: float = 0.0
    """With value_target_q > 0: the search value in the target is the TD(lambda)
    return of the game's search values (0 = the position's own; selfplay doc)."""
    value_length_shaping: float = 0.0
    """Game-length shaping of the result in the value target (DeepFour): a decided
    game counts +-(1 - s * n / 42) for a position n plies before its end, so quick
    wins and slow losses are preferred; s in [0, 1) (0 = off: +-1)."""
    opening_targets: Literal["drop", "search"] = "drop"
    """Positions up to the last random opening move of their game: drop (not trained on),
    or search (trained on the search policy, with the search value as the value target:
    the searches were run anyway, and neither target depends on the random moves after)."""
    full_search_fraction: float = 1.0
    """Playout cap randomization (KataGo): the share of self-play moves searched with
    search.num_simulations and trained on; the other moves are searched with
    fast_search_simulations only to play on, and are not trained on (1 = off)."""
    fast_search_simulations: int = 8
    """Simulations of the fast searches (used when full_search_fraction < 1)."""


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation during training."""

    every: int = 10
    """Evaluate every this many iterations (0 = never)."""
    games: int = 64
    """Games against each reference opponent (half with each colour)."""
    num_simulations: int = 32
    """Search simulations for the agent in evaluation games (0 = network alone)."""
    solver_positions: int = 0
    """Positions of each solver set in the mistake-rate sample (0 = skip it)."""
    solver_sets: str = "L1_R1,L1_R2,L2_R2"
    """Comma-separated Pons sets of the mistake-rate sample."""
    gating: float = 0.0
    """Gating (0 = off): self-play uses the best network so far, which a new one
    replaces only if it scores more than this share (e.g. 0.55) against it."""
    gating_games: int = 64
    """Games of the gating match (half with each colour)."""


@dataclass(frozen=True)
class Config:
    """A whole run."""

    seed: int = 0
    """Seed of the one root PRNG key."""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint_every: int = 10
    """Save a checkpoint every this many iterations (the last one is always saved)."""
    keep_checkpoints: int = 3
    """Latest checkpoints kept (the best by evaluation score is kept besides)."""
    distributed: bool = False
    """Run as one of several processes (one per host): jax.distributed.initialize()
    first. JAX finds the others under SLURM, Open MPI or on a TPU pod; elsewhere
    give --coordinator HOST:PORT --num-processes N --process-id I."""


def check(ok: bool, name: str, allowed: str, value: Any) -> None:
    """Raises ValueError ``config field NAME: got VALUE, allowed: ALLOWED`` unless ``ok``."""
    if not ok:
        raise ValueError(f"config field {name}: got {value!r}, allowed: {allowed}")


def validate(config: Config, num_devices: int = 1) -> Config:
    """Raises ValueError naming the field if ``config`` cannot run; returns it."""
    n, s, t, e = config.network, config.search, config.train, config.eval
    for section in ("network", "search", "train", "eval"):
        for f in dataclasses.fields(getattr(config, section)):
            value = getattr(getattr(config, section), f.name)
            check(
                not isinstance(value, float) or math.isfinite(value),
                f"{section}.{f.name}", "a finite number", value,
            )
    for name, value in [
        ("network.num_blocks", n.num_blocks),
        ("network.channels", n.channels),
        ("network.value_channels", n.value_channels),
        ("search.num_simulations", s.num_simulations),
        ("train.num_iterations", t.num_iterations),
        ("train.selfplay_batch", t.selfplay_batch),
        ("train.selfplay_steps", t.selfplay_steps),
        ("train.replay_capacity", t.replay_capacity),
        ("train.minibatch_size", t.minibatch_size),
        ("train.sgd_steps", t.sgd_steps),
        ("keep_checkpoints", config.keep_checkpoints),
    ]:
        check(isinstance(value, int) and value >= 1, name, "an integer >= 1", value)
    check(n.kernel_size in (1, 3, 5, 7), "network.kernel_size", "1, 3, 5 or 7", n.kernel_size)
    check(
        1 <= s.max_num_considered_actions <= 7,
        "search.max_num_considered_actions",
        "1..7",
        s.max_num_considered_actions,
    )
    check(s.gumbel_scale >= 0, "search.gumbel_scale", ">= 0", s.gumbel_scale)
    check(
        isinstance(s.gumbel_noise_moves, int) and 0 <= s.gumbel_noise_moves <= 42,
        "search.gumbel_noise_moves", "an integer in 0..42 (42 = the whole game)",
        s.gumbel_noise_moves,
    )
    check(s.c_visit >= 0, "search.c_visit", ">= 0", s.c_visit)
    check(s.c_scale > 0, "search.c_scale", "> 0", s.c_scale)
    check(
        s.evaluation_move in ("halving", "policy", "q"),
        "search.evaluation_move", "halving, policy, q", s.evaluation_move,
    )
    check(s.dirichlet_alpha > 0, "search.dirichlet_alpha", "> 0", s.dirichlet_alpha)
    check(
        0 <= s.dirichlet_fraction <= 1, "search.dirichlet_fraction", "0..1", s.dirichlet_fraction
    )
    check(s.pb_c_init > 0, "search.pb_c_init", "> 0", s.pb_c_init)
    check(s.temperature_moves >= 0, "search.temperature_moves", ">= 0", s.temperature_moves)
    check(s.algorithm in ("gumbel", "puct"), "search.algorithm", "gumbel, puct", s.algorithm)
    for name, value in [
        ("train.selfplay_batch", t.selfplay_batch),
        ("train.minibatch_size", t.minibatch_size),
    ]:
        check(
            value % num_devices == 0,
            name,
            f"a multiple of the device count ({num_devices})",
            value,
        )
    check(
        t.replay_capacity >= t.minibatch_size,
        "train.replay_capacity",
        f">= train.minibatch_size ({t.minibatch_size})",
        t.replay_capacity,
    )
    check(
        t.replay_capacity >= t.selfplay_batch * t.selfplay_steps,
        "train.replay_capacity",
        f">= one self-play chunk, selfplay_batch * selfplay_steps "
        f"({t.selfplay_batch * t.selfplay_steps})",
        t.replay_capacity,
    )
    check(
        0 <= t.min_replay_size <= t.replay_capacity,
        "train.min_replay_size",
        f"0..train.replay_capacity ({t.replay_capacity})",
        t.min_replay_size,
    )
    check(t.learning_rate > 0, "train.learning_rate", "> 0", t.learning_rate)
    check(t.warmup_steps >= 0, "train.warmup_steps", ">= 0", t.warmup_steps)
    check(t.weight_decay >= 0, "train.weight_decay", ">= 0", t.weight_decay)
    check(t.value_loss_weight >= 0, "train.value_loss_weight", ">= 0", t.value_loss_weight)
    check(t.kl_target >= 0, "train.kl_target", ">= 0 (0 = off)", t.kl_target)
    check(
        isinstance(t.random_opening_moves, int) and 0 <= t.random_opening_moves <= 41,
        "train.random_opening_moves", "an integer in 0..41 (0 = off)", t.random_opening_moves,
    )
    check(0 <= t.value_target_q <= 1, "train.value_target_q", "0..1", t.value_target_q)
    check(
        0 <= t.value_target_lambda < 1, "train.value_target_lambda", "0 <= l < 1",
        t.value_target_lambda,
    )
    check(
        t.value_target_lambda == 0 or t.value_target_q > 0, "train.value_target_lambda",
        "0 while train.value_target_q is 0 (it shapes the search value's share)",
        t.value_target_lambda,
    )
    check(
        0 <= t.value_length_shaping < 1, "train.value_length_shaping", "0 <= s < 1",
        t.value_length_shaping,
    )
    check(
        0 < t.full_search_fraction <= 1, "train.full_search_fraction", "in (0, 1] (1 = off)",
        t.full_search_fraction,
    )
    check(
        isinstance(t.fast_search_simulations, int)
        and 1 <= t.fast_search_simulations
        and (t.full_search_fraction == 1 or t.fast_search_simulations < s.num_simulations),
        "train.fast_search_simulations",
        f"an integer >= 1, below search.num_simulations ({s.num_simulations})",
        t.fast_search_simulations,
    )
    check(t.optimizer in ("adamw", "sgd"), "train.optimizer", "adamw, sgd", t.optimizer)
    check(
        t.opening_targets in ("drop", "search"), "train.opening_targets", "drop, search",
        t.opening_targets,
    )
    check(
        t.lr_schedule in ("constant", "cosine", "onecycle"), "train.lr_schedule",
        "constant, cosine, onecycle",
        t.lr_schedule,
    )
    check(e.every >= 0, "eval.every", ">= 0 (0 = never)", e.every)
    check(e.games >= 2 and e.games % 2 == 0, "eval.games", "an even integer >= 2", e.games)
    check(e.num_simulations >= 0, "eval.num_simulations", ">= 0", e.num_simulations)
    check(e.solver_positions >= 0, "eval.solver_positions", ">= 0", e.solver_positions)
    known_sets = ("L1_R1", "L1_R2", "L1_R3", "L2_R1", "L2_R2", "L3_R1")
    check(
        all(name in known_sets for name in e.solver_sets.split(",")),
        "eval.solver_sets",
        "a comma-separated subset of " + ",".join(known_sets),
        e.solver_sets,
    )
    check(0 <= e.gating < 1, "eval.gating", "0 (off) or a share in (0, 1), e.g. 0.55", e.gating)
    check(
        e.gating_games >= 2 and e.gating_games % 2 == 0,
        "eval.gating_games",
        "an even integer >= 2",
        e.gating_games,
    )
    check(
        not (e.gating and not e.every),
        "eval.gating",
        "0 when eval.every is 0 (gating happens at evaluations)",
        e.gating,
    )
    check(config.checkpoint_every >= 1, "checkpoint_every", ">= 1", config.checkpoint_every)
    return config


def field_value(config: Any, dotted: str) -> Any:
    """The value of field ``section.name`` (or ``name``) of a config."""
    value = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def check_unchanged(stored: Any, requested: Any, fields: tuple[str, ...]) -> None:
    """Raises ValueError naming each of ``fields`` (dotted) that differs between the
    config stored with a checkpoint and the one requested for resuming it."""
    problems = [
        f"{name} is {field_value(stored, name)!r} in the checkpoint but "
        f"{field_value(requested, name)!r} now"
        for name in fields
        if field_value(stored, name) != field_value(requested, name)
    ]
    if problems:
        raise ValueError(
            "incompatible checkpoint in the run directory: "
            + "; ".join(problems)
            + ". Use a new --workdir, or drop those overrides."
        )


def to_dict(config: Any) -> dict:
    """The config as plain JSON-ready nested dicts."""
    return dataclasses.asdict(config)


def from_dict(data: dict, cls: type = Config, prefix: str = "") -> Any:
    """Builds a (nested) config dataclass from dicts; unknown keys raise ValueError."""
    if not isinstance(data, dict):
        raise ValueError(f"config section {prefix or '<root>'}: expected an object, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)  # resolves the string annotations to the section classes
    kwargs = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in fields:
            raise ValueError(
                f"unknown config field {name!r}; allowed here: {', '.join(sorted(fields))}"
            )
        sub = hints[key]
        if dataclasses.is_dataclass(sub):
            kwargs[key] = from_dict(value, sub, name + ".")
        else:
            kwargs[key] = _coerce(name, fields[key], value)
    return cls(**kwargs)


def _coerce(name: str, f: dataclasses.Field, value: Any) -> Any:
    default = f.default
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ValueError(
            f"config field {name}: got {value!r}, expected {type(default).__name__}"
        )
    return value



def preset_names(preset_dir: Path = PRESET_DIR) -> list[str]:
    """Names of the presets in ``preset_dir`` (default ``configs/``)."""
    return sorted(p.stem for p in Path(preset_dir).glob("*.json"))


def load(path_or_name: str, cls: type = Config, preset_dir: Path = PRESET_DIR) -> Any:
    """Loads a preset by name (``cpu``) or a JSON file path (``configs/cpu.json``).

    ``cls`` is the config class to build (the AlphaZero ``Config`` by default),
    ``preset_dir`` where its named presets live.
    """
    path = Path(path_or_name)
    if not path.suffix and not path.exists():
        path = Path(preset_dir) / f"{path_or_name}.json"
    if not path.is_file():
        raise ValueError(
            f"--config {path_or_name}: no such file; presets: "
            + ", ".join(preset_names(preset_dir))
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"--config {path}: not valid JSON ({err})") from err
    return from_dict(data, cls)


def save(config: Any, path: Path) -> None:
    """Writes ``config`` as indented JSON."""
    Path(path).write_text(json.dumps(to_dict(config), indent=2) + "\n")
