"""Typed, frozen configuration of an AlphaZero run; presets live as JSON in ``configs/``.

The dataclass defaults are the tuned recipe (random openings, the search value
in the value target, cosine schedule, ...); a preset states only what differs
from them, mostly the run's size and length. Every field can be overridden from
the command line (``c4jax.run.cli``). Each field's type, choices and limits are
written beside it and checked by ``c4jax.schema.check_fields``; ``validate``
adds the rules that tie fields together, before anything is compiled, with a
message that names the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from c4jax import inputs, schema

PRESET_DIR = Path(__file__).resolve().parent.parent / "configs"  # top-level configs/ links here
MAX_SGD_STEPS = 2**31 - 1  # a run's SGD steps: the learning-rate schedule counts them in int32


@dataclass(frozen=True)
class NetworkConfig:
    """The policy-value ResNet."""

    num_blocks: int = schema.field(5, ge=1)
    """Residual blocks."""
    channels: int = schema.field(64, ge=1)
    """Convolution channels in every block."""
    kernel_size: Literal[1, 3, 5, 7] = 3
    """Side of the square convolution kernels."""
    value_channels: int = schema.field(1, ge=1)
    """1x1 convolution channels of the value head, before its hidden dense layer
    (AlphaZero's 1; more give the value more of the board's features)."""
    bfloat16: bool = False
    """Compute in bfloat16 (parameters and outputs stay float32)."""
    opponent_head: bool = False
    """A second policy head that predicts the opponent's reply (the search policy of
    the next position), trained as an auxiliary target with weight
    train.opponent_policy_weight (KataGo); search and play never read it."""
    final_board_head: bool = False
    """A head that predicts the board the game will end with (for each cell: the
    mover's stone, the opponent's, or empty), trained as an auxiliary target with
    weight train.final_board_weight (KataGo's ownership head); search and play
    never read it."""
    threat_planes: bool = False
    """Two more input planes computed from the board: the empty cells where a stone
    would complete a line of four, for the mover and for the opponent
    (Connect Four's threats, playable now or not)."""
    global_pool: int = schema.field(0, ge=0, note="0 = off")
    """Global pooling in every residual block (KataGo's global pooling bias):
    the mean and the maximum over the board of the first global_pool channels
    of the block's first convolution, through a dense layer, add a bias to
    each of its channels before the second convolution, so every block sees
    the whole board at once. At most network.channels."""


@dataclass(frozen=True)
class SearchConfig:
    """The mctx search used for self-play and evaluation."""

    algorithm: Literal["gumbel", "puct"] = "gumbel"
    """gumbel: mctx.gumbel_muzero_policy; puct: mctx.muzero_policy with Dirichlet noise."""
    num_simulations: int = schema.field(32, ge=1)
    """Simulations per move."""
    max_num_considered_actions: int = schema.field(7, ge=1, le=7)
    """Gumbel: actions sampled at the root (7 = all)."""
    gumbel_scale: float = schema.field(1.0, ge=0)
    """Gumbel: scale of the root Gumbel noise in self-play (0 in evaluation)."""
    gumbel_noise_moves: int = schema.field(42, ge=0, le=42, note="42 = the whole game")
    """Gumbel, in self-play: the root noise is on while fewer than this many
    stones are on the board, and off after, where self-play takes the search's
    best move (AlphaZero's temperature drop; random openings still vary the
    games). 42 = on for the whole game."""
    c_visit: float = schema.field(50.0, ge=0)
    """Gumbel: c_visit of the completed-Q transform, sigma(q) = (c_visit + max
    child visits) * c_scale * q (mctx's maxvisit_init)."""
    c_scale: float = schema.field(0.1, gt=0)
    """Gumbel: c_scale of the completed-Q transform (mctx's value_scale); larger
    makes the search follow Q-values over the network's prior sooner."""
    evaluation_move: Literal["halving", "policy", "q"] = "halving"
    """Gumbel, in evaluation: halving = mctx's pick among the last survivors of
    sequential halving; policy = argmax of the improved policy; q = argmax of the
    search's Q-values (unvisited moves valued at the root's search value)."""
    dirichlet_alpha: float = schema.field(0.3, gt=0)
    """PUCT: concentration of the root Dirichlet noise."""
    dirichlet_fraction: float = schema.field(0.25, ge=0, le=1)
    """PUCT: weight of the root Dirichlet noise."""
    pb_c_init: float = schema.field(1.25, gt=0)
    """PUCT: exploration constant."""
    temperature_moves: int = schema.field(10, ge=0)
    """PUCT: moves of each game played by sampling visit counts; later moves take the best."""


@dataclass(frozen=True)
class TrainConfig:
    """Self-play, replay and learning."""

    num_iterations: int = schema.field(100, ge=1, le=inputs.MAX_STEP)
    """Fused iterations (self-play chunk + SGD steps) to run; with a time_budget, the most."""
    time_budget: str = schema.field(
        "", rule=lambda s: s == "" or inputs.is_duration(s),
        allowed=f"'' (off) or {inputs.DURATION_FORMS}")
    """Fit a new run in this wall time (e.g. 2h): the first iterations are timed, and the
    iteration count (hence the learning-rate schedule) is chosen from them, at most
    num_iterations, measured again from the run's own pace a tenth, a quarter and half
    of the way in, and stored in the run's config.json, so a resume continues the same
    schedule ('' = off: num_iterations iterations)."""
    selfplay_batch: int = schema.field(256, ge=1)
    """Games played in parallel (B); must divide by the device count."""
    selfplay_steps: int = schema.field(32, ge=1)
    """Moves each game advances per iteration (T)."""
    replay_capacity: int = schema.field(65536, ge=1)
    """Positions kept in the replay buffer."""
    replay_window: int = schema.field(0, ge=0, note="0 = off")
    """A replay window that grows with the run (KataGo): SGD draws only from the newest
    W positions, W = N, the positions searched so far, while N <= this, then
    this * (N / this) ** replay_window_power (and never more than the buffer holds);
    0 = off: the whole buffer."""
    replay_window_power: float = schema.field(0.75, gt=0, le=1)
    """How fast the replay window grows past replay_window (1: the whole history)."""
    endgame_sample_weight: float = schema.field(1.0, gt=0, le=1, note="1 = off")
    """Endgame positions (at least endgame_stones stones on the board) are drawn into
    the minibatches this much less often than the others: SGD draws a position with
    probability proportional to this weight for an endgame one and 1 for any other
    (replay.sample), so more of the updates go to the opening and middle game, where
    the mistakes are (1 = off: uniform)."""
    endgame_stones: int = schema.field(29, ge=1, le=42)
    """The fewest stones of an endgame position for endgame_sample_weight (29: the
    Pons sets' end stage, more than 28)."""
    minibatch_size: int = schema.field(256, ge=1)
    """Positions per SGD step; must divide by the device count."""
    sgd_steps: int = schema.field(32, ge=1)
    """SGD steps per iteration."""
    min_replay_size: int = schema.field(0, ge=0)
    """Positions in the buffer before learning starts (0 = learn as soon as any game ends).
    The iterations before do not learn, and the learning-rate schedule counts the SGD
    steps taken, so it stops that many steps short of its end (the cosine above 10%)."""
    optimizer: Literal["adamw", "sgd"] = "adamw"
    """adamw (decoupled weight decay) or sgd with momentum 0.9 and L2 loss."""
    learning_rate: float = schema.field(1e-3, gt=0)
    """Peak learning rate."""
    warmup_steps: int = schema.field(100, ge=0)
    """Linear warm-up of the learning rate, in SGD steps (constant and cosine schedules;
    onecycle has its own rise and ignores it)."""
    lr_schedule: Literal["constant", "cosine", "onecycle"] = "cosine"
    """After warm-up: constant, or cosine decay to 10% at the last SGD step; or
    onecycle (no warm-up): up from 4% of the peak over the first 30% of the SGD
    steps, then down to ~0 at the last."""
    weight_decay: float = schema.field(1e-4, ge=0)
    """AdamW decay, or the L2 coefficient with sgd."""
    value_loss_weight: float = schema.field(1.0, ge=0)
    """Weight of the value MSE beside the policy cross-entropy."""
    opponent_policy_weight: float = schema.field(0.15, ge=0)
    """Weight of the opponent-reply cross-entropy (KataGo's 0.15); read only with
    network.opponent_head."""
    final_board_weight: float = schema.field(1.5, ge=0)
    """Weight of the final-board cross-entropy, averaged over the 42 cells (KataGo
    weighs its ownership loss 1.5 per cell, averaged over the board); read only
    with network.final_board_head."""
    policy_surprise_weight: float = schema.field(0.0, ge=0, le=1, note="0 = off")
    """Policy surprise weighting (KataGo; 0.5 there): each trained position's loss
    weight is (1 - this) + this * k / mean(k), k the KL divergence from the network's
    prior to the search policy at it, the mean over the positions a self-play chunk
    adds (so the weights average 1); 0 = off: every position weighs 1."""
    surprise_starts: float = schema.field(0.0, ge=0, le=1, note="0 = off")
    """The share of new self-play games that start from a pool of the most surprising
    positions of earlier chunks (where the search moved the network's policy most)
    instead of from a random opening; needs random openings played at once
    (random_opening_moves > 0, opening_targets drop). 0 = off."""
    surprise_pool: int = schema.field(4096, ge=1)
    """Positions in the start pool of surprise_starts (each chunk replaces the oldest
    selfplay_batch of them with its most surprising ones)."""
    surprise_start_moves: int = schema.field(20, ge=0, le=41)
    """The most stones a position may have to enter the start pool (the opening stage)."""
    kl_target: float = schema.field(0.0, ge=0, note="0 = off")
    """KL-adaptive learning rate: target KL(before || after) per SGD step (0 = off)."""
    mirror_augment: bool = True
    """Mirror sampled positions left-right with probability 1/2."""
    random_opening_moves: int = schema.field(12, ge=0, le=41, note="0 = off")
    """Each self-play game opens with k ~ U{0..this} uniformly random moves (0 = off);
    what positions up to the last random move teach is ``opening_targets``."""
    value_target_q: float = schema.field(0.5, ge=0, le=1)
    """Value target (1 - w) * game result + w * search value of the position (0 = result only)."""
    value_target_lambda: float = schema.field(0.0, ge=0, lt=1)
    """With value_target_q > 0: the search value in the target is the TD(lambda)
    return of the game's search values (0 = the position's own; selfplay doc)."""
    value_length_shaping: float = schema.field(0.0, ge=0, lt=1, note="0 = off")
    """Game-length shaping of the result in the value target (DeepFour): a decided
    game counts +-(1 - s * n / 42) for a position n plies before its end, so quick
    wins and slow losses are preferred; s in [0, 1) (0 = off: +-1)."""
    opening_targets: Literal["drop", "search"] = "drop"
    """Positions up to the last random opening move of their game: drop (the random moves
    are played at once when the game starts: neither searched nor trained on), or search
    (played one a step and searched, and trained on the search policy with the search
    value as the value target: neither depends on the random moves after)."""
    full_search_fraction: float = schema.field(1.0, gt=0, le=1, note="1 = off")
    """Playout cap randomization (KataGo): the share of self-play moves searched with
    search.num_simulations and trained on; the other moves are searched with
    fast_search_simulations only to play on, and are not trained on (1 = off)."""
    fast_search_simulations: int = schema.field(8, ge=1)
    """Simulations of the fast searches (used when full_search_fraction < 1)."""
    opening_search_games: int = schema.field(0, ge=0, note="0 = off")
    """At each self-play move, this many of the selfplay_batch games, those with the
    fewest stones on the board (nearest their start: the opening, which the network
    judges worst), are searched with opening_search_simulations instead of
    search.num_simulations, and trained on that larger search (0 = off). With
    full_search_fraction < 1 it replaces the full searches; the fast ones stay fast."""
    opening_search_simulations: int = schema.field(64, ge=1)
    """Simulations of the opening searches (used when opening_search_games > 0)."""


@dataclass(frozen=True)
class EvalConfig(schema.EvalBase):
    """Periodic evaluation during training (every, games and the solver sample are
    shared with the value-based engine)."""

    num_simulations: int = schema.field(32, ge=0)
    """Search simulations for the agent in evaluation games (0 = network alone)."""
    gating: float = schema.field(0.0, ge=0, lt=1, allowed="0 (off) or a share in (0, 1), e.g. 0.55")
    """Gating (0 = off): self-play uses the best network so far, which a new one
    replaces only if it scores more than this share (e.g. 0.55) against it."""
    gating_games: int = schema.field(64, ge=2, even=True)
    """Games of the gating match (half with each colour)."""


@dataclass(frozen=True)
class Config:
    """A whole run."""

    seed: int = schema.field(0, ge=0, le=inputs.MAX_SEED)
    """Seed of the one root PRNG key."""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint_every: int = schema.field(10, ge=1)
    """Save a checkpoint every this many iterations (the last one is always saved)."""
    keep_checkpoints: int = schema.field(3, ge=1)
    """Latest checkpoints kept (the best by evaluation score is kept besides)."""
    distributed: bool = False
    """Run as one of several processes (one per host): jax.distributed.initialize()
    first. JAX finds the others under SLURM, Open MPI or on a TPU pod; elsewhere
    give --coordinator HOST:PORT --num-processes N --process-id I."""


# The generic machinery lives in c4jax.schema; these names stay reachable here.
check = schema.check
field_value = schema.field_value
check_unchanged = schema.check_unchanged
to_dict = schema.to_dict
save = schema.save


def validate(config: Config, num_devices: int = 1) -> Config:
    """Raises ValueError naming the field if ``config`` cannot run; returns it.

    Each field is checked against its own annotation and limits
    (``schema.check_fields``); the rules below tie several fields together.
    """
    schema.check_fields(config)
    s, t, e = config.search, config.train, config.eval
    for name in ("selfplay_batch", "minibatch_size"):
        value = getattr(t, name)
        check(value % num_devices == 0, f"train.{name}",
              f"a multiple of the device count ({num_devices})", value)
    check(t.replay_capacity >= t.minibatch_size, "train.replay_capacity",
          f">= train.minibatch_size ({t.minibatch_size})", t.replay_capacity)
    chunk = t.selfplay_batch * t.selfplay_steps
    check(t.replay_capacity >= chunk, "train.replay_capacity",
          f">= one self-play chunk, selfplay_batch * selfplay_steps ({chunk})",
          t.replay_capacity)
    check(t.min_replay_size <= t.replay_capacity, "train.min_replay_size",
          f"0..train.replay_capacity ({t.replay_capacity})", t.min_replay_size)
    check(t.value_target_lambda == 0 or t.value_target_q > 0, "train.value_target_lambda",
          "0 while train.value_target_q is 0 (it shapes the search value's share)",
          t.value_target_lambda)
    check(t.full_search_fraction == 1 or t.fast_search_simulations < s.num_simulations,
          "train.fast_search_simulations",
          f"below search.num_simulations ({s.num_simulations}) while "
          "train.full_search_fraction < 1",
          t.fast_search_simulations)
    check(t.surprise_starts == 0 or (t.random_opening_moves > 0 and t.opening_targets == "drop"),
          "train.surprise_starts",
          "0 unless random openings are played at once (train.random_opening_moves > 0 "
          "and train.opening_targets 'drop')", t.surprise_starts)
    check(config.network.global_pool <= config.network.channels, "network.global_pool",
          f"0..network.channels ({config.network.channels})", config.network.global_pool)
    check(t.num_iterations * t.sgd_steps <= MAX_SGD_STEPS, "train.num_iterations",
          f"at most {MAX_SGD_STEPS // t.sgd_steps} with train.sgd_steps {t.sgd_steps} "
          f"(the run's SGD steps, at most {MAX_SGD_STEPS})", t.num_iterations)
    check(t.opening_search_games <= t.selfplay_batch, "train.opening_search_games",
          f"0..train.selfplay_batch ({t.selfplay_batch})", t.opening_search_games)
    # Settings of an option that is off: refused unless left at their defaults.
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for name, option, on in (
        ("opponent_policy_weight", "network.opponent_head", config.network.opponent_head),
        ("final_board_weight", "network.final_board_head", config.network.final_board_head),
        ("surprise_pool", "train.surprise_starts", t.surprise_starts > 0),
        ("surprise_start_moves", "train.surprise_starts", t.surprise_starts > 0),
        ("opening_search_simulations", "train.opening_search_games",
         t.opening_search_games > 0),
        ("endgame_stones", "train.endgame_sample_weight", t.endgame_sample_weight < 1),
        ("replay_window_power", "train.replay_window", t.replay_window > 0),
        ("fast_search_simulations", "train.full_search_fraction", t.full_search_fraction < 1),
    ):
        value = getattr(t, name)
        check(on or value == defaults[name], f"train.{name}",
              f"{defaults[name]} (its default) unless {option} is on: nothing else reads it",
              value)
    check(not (e.gating and not e.every), "eval.gating",
          "0 when eval.every is 0 (gating happens at evaluations)", e.gating)
    return config


def from_dict(data: dict, cls: type = Config, prefix: str = "") -> Any:
    """Builds a (nested) config dataclass from dicts by field name; unknown keys raise
    ValueError (``schema.from_dict``)."""
    return schema.from_dict(data, cls, prefix=prefix)


def preset_names(preset_dir: Path = PRESET_DIR) -> list[str]:
    """Names of the presets in ``preset_dir`` (default ``configs/``)."""
    return schema.preset_names(preset_dir)


def load(path_or_name: str, cls: type = Config, preset_dir: Path = PRESET_DIR) -> Any:
    """Loads a preset by name (``cpu``) or a JSON file path (``configs/cpu.json``).

    ``cls`` is the config class to build (the AlphaZero ``Config`` by default),
    ``preset_dir`` where its named presets live; missing fields take the defaults.
    """
    return schema.load(path_or_name, cls=cls, preset_dir=preset_dir)
