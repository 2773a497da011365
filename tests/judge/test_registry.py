"""The agent registry: spec parsing, errors that list the forms, building agents."""

import functools
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from c4jax import baselines, env, inputs
from c4jax.judge import registry
from c4jax.player import Player

# --- Agent specs (no checkpoint needed). ---


@pytest.mark.parametrize(
    "spec, kind, value",
    [
        ("random", "random", None),
        ("lookahead", "lookahead", None),
        ("win-if-you-can", "win-if-you-can", None),
        ("mcts", "mcts", 1000),
        ("mcts-50", "mcts", 50),
        ("minimax", "minimax", 5),
        ("minimax-3", "minimax", 3),
    ],
)
def test_parse_spec_reference_agents(spec, kind, value):
    parsed = registry.parse_spec(spec)
    assert (parsed.kind, parsed.value) == (kind, value)


def test_parse_spec_dqn_forms(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert registry.parse_spec(f"dqn:{run}") == registry.AgentSpec(kind="dqn", run_dir=run)
    assert registry.parse_spec(f"dqn:{run}:30").step == 30
    with pytest.raises(ValueError, match="no run directory"):
        registry.parse_spec(f"dqn:{tmp_path / 'nope'}")
    with pytest.raises(ValueError, match="checkpoint step 'x' is not a whole number"):
        registry.parse_spec(f"dqn:{run}:x")


def test_dqn_without_a_run_directory_is_refused():
    """``dqn:`` is not the current directory."""
    for spec in ("dqn:", "dqn::5"):
        with pytest.raises(ValueError, match="no run directory ''"):
            registry.parse_spec(spec)


def test_a_file_does_not_hide_a_reference_agent_but_a_directory_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("minimax", "mcts-50", "pretrained@8"):
        (tmp_path / name).touch()
    assert registry.parse_spec("minimax") == registry.AgentSpec(kind="minimax", value=5)
    assert registry.parse_spec("mcts-50") == registry.AgentSpec(kind="mcts", value=50)
    assert registry.parse_spec("pretrained@8") == registry.AgentSpec(kind="pretrained", sims=8)
    (tmp_path / "mcts").mkdir()  # a run named like the agent: the run
    assert registry.parse_spec("mcts") == registry.AgentSpec(kind="run", run_dir=Path("mcts"))


def test_parse_spec_run_forms(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert registry.parse_spec(str(run)) == registry.AgentSpec(kind="run", run_dir=run)
    parsed = registry.parse_spec(f"{run}@64")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, None, 64)
    parsed = registry.parse_spec(f"{run}:40@0")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, 40, 0)
    parsed = registry.parse_spec(f"{run}:7")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, 7, None)


def test_parse_spec_named_checkpoints(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    parsed = registry.parse_spec(f"{run}:last@64")
    assert (parsed.run_dir, parsed.step, parsed.sims) == (run, "last", 64)
    assert registry.parse_spec(f"{run}:last").step == "last"
    assert registry.parse_spec(f"{run}:best") == registry.parse_spec(str(run))  # the default
    assert registry.parse_spec(f"dqn:{run}:last").step == "last"
    with pytest.raises(ValueError, match="step 'newest' is not a whole number, last or best"):
        registry.parse_spec(f"{run}:newest")


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("mcst", "no run directory 'mcst'"),
        ("mcts-0", "out of range"),
        ("mcts-many", "not a whole number"),
        ("minimax-0", "out of range"),
        ("minimax-99", "out of range"),
        ("", "empty"),
        ("no/such/run@64", "no run directory 'no/such/run'"),
    ],
)
def test_make_agent_rejects_bad_specs(spec, problem):
    with pytest.raises(ValueError) as err:
        registry.make_agent(spec)
    message = str(err.value)
    assert problem in message
    assert "Allowed:" in message and "mcts-N" in message


def test_a_path_is_a_spec_and_a_non_string_is_named_as_such(tmp_path):
    """``make_agent(Path("runs/X"))`` (as ``Player.from_checkpoint`` takes) said "empty"."""
    from pathlib import Path

    with pytest.raises(ValueError, match="not a run directory") as err:
        registry.make_agent(Path(tmp_path))  # a folder without checkpoints: read as a run
    assert str(tmp_path) in str(err.value)
    assert registry.parse_spec(Path(tmp_path)).run_dir == Path(tmp_path)
    with pytest.raises(ValueError, match="an agent spec is a string .or a path., got int 64"):
        registry.parse_spec(64)


def test_make_agent_rejects_bad_run_suffixes(tmp_path):
    with pytest.raises(ValueError, match="simulations 'x' is not a whole number"):
        registry.make_agent(f"{tmp_path}@x")
    with pytest.raises(ValueError, match="not a run directory"):
        registry.make_agent(f"{tmp_path}@4")  # a folder, but no checkpoints/


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("mcts-\u0663", "simulations '\u0663' is not a whole number"),  # Arabic-Indic 3
        ("mcts-\u00b2", "simulations '\u00b2' is not a whole number"),  # superscript 2
        ("minimax-\u0663", "depth '\u0663' is not a whole number"),
        ("pretrained@\u0663", "simulations '\u0663' is not a whole number"),
        ("pretrained@-1", "simulations '-1' is not a whole number"),
        ("pretrained@ 8", "simulations ' 8' is not a whole number"),
        ("mcts-1_000", "simulations '1_000' is not a whole number"),
        ("mcts-4097", f"simulations 4097 is out of range (1-{inputs.MAX_SIMULATIONS})"),
        ("pretrained@4097", "simulations 4097 is out of range (0-4096)"),
        ("mcts-" + "9" * 30, "simulations 99999999999999999999... (30 digits) is out of range"),
        ("pretrained@" + "9" * 4000, "(4000 digits) is out of range (0-4096)"),
    ],
)
def test_spec_numbers_are_ascii_digits_within_bounds(spec, problem):
    with pytest.raises(ValueError) as err:
        registry.parse_spec(spec)
    message = str(err.value)
    assert problem in message and "\n" not in message and len(message) < 600, message
    assert registry.parse_spec(f"mcts-{inputs.MAX_SIMULATIONS}").value == inputs.MAX_SIMULATIONS
    assert registry.parse_spec(f"pretrained@{inputs.MAX_SIMULATIONS}").sims == 4096


def test_run_spec_numbers_are_ascii_digits_within_bounds(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for suffix, problem in [
        (":\u0663", "checkpoint step '\u0663' is not a whole number, last or best"),
        (":" + "1" * 11, "checkpoint step 11111111111 is out of range (0-1000000000)"),
        ("@\u0663", "simulations '\u0663' is not a whole number"),
        (":5@5000", "simulations 5000 is out of range (0-4096)"),
    ]:
        with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
            registry.parse_spec(f"{run}{suffix}")
    assert registry.parse_spec(f"{run}:{registry.MAX_STEP}@0").step == registry.MAX_STEP
    with pytest.raises(ValueError, match="checkpoint step '\u0663' is not a whole number"):
        registry.parse_spec(f"dqn:{run}:\u0663")


@pytest.mark.parametrize("spec", ["x" * 100_000, "mcts-" + "1" * 100_000, "a/" * 3000])
def test_a_very_long_spec_is_refused_in_a_short_line(spec):
    with pytest.raises(ValueError) as err:
        registry.make_agent(spec)
    message = str(err.value)
    assert f"({len(spec)} characters): longer than {registry.MAX_SPEC_LENGTH} characters" in message
    assert len(message) < 600 and "\n" not in message


@pytest.mark.parametrize("spec", ["a" * 300, "a" * 300 + "@5", "dqn:" + "b" * 300, "x\x00y@3"])
def test_a_name_the_system_cannot_look_up_is_no_run_directory(spec):
    # Today a component over 255 bytes is an OSError (File name too long) from
    # Path.exists, and a NUL byte a ValueError about the byte: both as "no run directory".
    with pytest.raises(ValueError, match="no run directory") as err:
        registry.parse_spec(spec)
    assert len(str(err.value)) < 600


_SPEC_PIECES = st.sampled_from([
    "mcts", "minimax", "pretrained", "dqn:", "random", "-", "@", ":", "last", "best", "/",
    ".", "..", "0", "4096", "4097", "\u0663", "\u00b2", "\u2460", " ", "\n", "\x00", "9" * 25,
])


@settings(max_examples=300, deadline=None)
@given(spec=st.text(max_size=40) | st.lists(_SPEC_PIECES | st.text(max_size=4), max_size=6)
       .map("".join))
@example(spec="\U0001093a" * 6 + "\U00018d09" * 12)  # quoted as escapes: 184 characters
def test_any_text_is_a_spec_or_one_line_value_error(spec):
    """Random text: an ``AgentSpec`` or one short ``ValueError`` line, never another
    exception (the fuzzing of tests/test_train_fuzz.py, for agent specs)."""
    try:
        parsed = registry.parse_spec(spec)
    except ValueError as err:
        message = str(err)
        assert message.startswith("bad agent spec ") and "\n" not in message, message
        assert len(message) < 700, message
        return
    assert parsed.kind in {entry.kind for entry in registry.ENTRIES}
    for number in (parsed.value, parsed.sims):
        assert number is None or 0 <= number <= inputs.MAX_SIMULATIONS
    assert parsed.step in (None, registry.LAST) or 0 <= parsed.step <= registry.MAX_STEP


# --- Which checkpoint a run spec without STEP chose, in one line. ---


@pytest.fixture
def scores(monkeypatch):
    """``scores(dict)``: the run's checkpoints and their evaluation scores, without a run."""

    def use(table):
        monkeypatch.setattr(registry, "_scores", lambda run_dir: dict(table))

    return use


def test_the_note_names_the_best_checkpoint_and_how_to_get_the_newest(scores):
    scores({200: 0.7, 210: 0.8127, 280: 0.8120})
    note = registry.checkpoint_note("runs/X", 210, newest="runs/X:last")
    assert note == (
        "runs/X: the best checkpoint by evaluation score, iteration 210 (score 0.8127);"
        " the newest is iteration 280 (score 0.8120): runs/X:last plays it"
    )


def test_the_note_when_the_best_is_the_newest_or_nothing_is_scored(scores):
    scores({200: 0.7, 280: 0.8})
    note = registry.checkpoint_note("runs/X", 280, newest="runs/X:last")
    assert note == (
        "runs/X: the best checkpoint by evaluation score, iteration 280 (score 0.8000),"
        " which is also the newest"
    )
    scores({200: None, 280: None})
    note = registry.checkpoint_note("runs/X", 280, newest="runs/X:last")
    assert note == "runs/X: the newest checkpoint, iteration 280 (none has an evaluation score)"


def test_the_note_past_a_damaged_best_checkpoint(scores):
    scores({200: 0.9, 240: 0.8, 280: None})  # 200 was damaged: 240 was loaded
    note = registry.checkpoint_note("runs/X", 240, newest="--step last")
    why = "the best readable checkpoint by evaluation score"
    assert note.startswith(f"runs/X: {why}, iteration 240 (score 0.8000);")
    assert note.endswith("the newest is iteration 280 (no evaluation score): --step last plays it")


# --- Building agents. ---


def test_make_agent_normalises_names_and_builds_the_baselines():
    assert registry.make_agent("random") == ("random", baselines.random_agent)
    assert registry.make_agent(" lookahead ") == ("lookahead", baselines.lookahead_agent)
    name, agent = registry.make_agent("mcts")
    assert name == "mcts-1000" and agent.keywords["num_simulations"] == 1000
    name, agent = registry.make_agent("minimax-3")
    assert name == "minimax-3" and agent.keywords["depth"] == 3


def test_every_entry_is_listed_in_the_forms_and_the_help():
    kinds = [entry.kind for entry in registry.ENTRIES]
    assert len(set(kinds)) == len(kinds) and kinds[-1] == "run"  # the catch-all is last
    help_text = registry.describe()
    for entry in registry.ENTRIES:
        assert entry.form in registry.AGENT_FORMS
        assert f"{entry.form}\n      {entry.description}" in help_text


def test_make_agents_rejects_a_repeated_agent():
    assert [n for n, _ in registry.make_agents(["random", "mcts-5"])] == ["random", "mcts-5"]
    with pytest.raises(ValueError, match="'mcts-1000' is listed twice"):
        registry.make_agents(["mcts", "mcts-1000"])


@pytest.mark.slow
def test_run_agents_are_cached_and_play_like_the_player(tiny_run):
    name, agent = registry.make_agent(f"{tiny_run}@0")
    step = int(name.rsplit(":", 1)[1].split("@")[0])
    assert name == f"{tiny_run}:{step}@0"
    assert registry.make_agent(f"{tiny_run}@0").agent is agent  # one object: reused jit
    assert registry.make_agent(f"{tiny_run}:{step}@0").name == name
    assert isinstance(agent, functools.partial)  # its variables are jit arguments
    player = Player.from_checkpoint(tiny_run, num_simulations=0)
    assert player.step == step
    states = env.stack([env.from_moves(m) for m in ("", "4", "4453", "121212")])
    key = jax.random.key(0)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(agent)(key, states)), np.asarray(jax.jit(player.act)(key, states))
    )


@pytest.mark.slow
def test_a_run_whose_checkpoints_changed_is_read_again(tiny_run_copy):
    """``make_agent("runs/X")`` in a notebook, training on, then again: the cache gave
    the first call's checkpoint, under its old name."""
    run, best = tiny_run_copy
    name, agent = registry.make_agent(f"{run}@0")
    assert name == f"{run}:{best}@0"
    assert registry.make_agent(f"{run}@0").agent is agent  # nothing changed: cached
    shutil.rmtree(run / "checkpoints" / str(best))  # its best checkpoint is another now
    again, _ = registry.make_agent(f"{run}@0")
    assert again != name and again.startswith(f"{run}:")


@pytest.mark.slow
def test_an_exported_network_is_an_agent_that_plays_like_its_run(tiny_run, tmp_path):
    from c4jax.store import checkpoints, exported

    restored = checkpoints.restore_variables(tiny_run, None)
    out = exported.export_network(restored, tmp_path / "net", {"note": "test"})
    name, agent = registry.make_agent(f"{out}@0")
    assert name == f"{out}@0"
    assert registry.make_agent(f"{out}@0").agent is agent  # cached: one jit
    _, from_run = registry.make_agent(f"{tiny_run}:{restored.step}@0")
    states = env.stack([env.from_moves(m) for m in ("", "4", "4453", "121212")])
    key = jax.random.key(0)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(agent)(key, states)), np.asarray(jax.jit(from_run)(key, states))
    )
    with pytest.raises(ValueError, match="exported network, which holds one step: drop :STEP"):
        registry.make_agent(f"{out}:3@0")


@pytest.mark.slow
def test_the_note_for_a_value_based_run_in_a_directory_named_with_at(tiny_dqn_run, tmp_path):
    """``dqn:RUN:STEP`` names are read from the end: the directory may hold ``@``."""
    run = tmp_path / "a@b"
    shutil.copytree(tiny_dqn_run, run)
    told = []
    named = registry.make_agent(str(run), tell=told.append)
    step = int(named.name.rsplit(":", 1)[1])
    assert named.name == f"dqn:{run}:{step}"
    assert told == [registry.checkpoint_note(run, step, newest=f"{run}:last")]


@pytest.mark.slow
def test_run_last_plays_the_newest_checkpoint_and_the_default_names_its_choice(tiny_run):
    from c4jax.store import checkpoints

    reader = checkpoints.open_for_reading(tiny_run)
    newest, best = max(reader.all_steps()), checkpoints.best_step(reader)
    reader.close()
    assert registry.newest_step(tiny_run) == newest
    told = []
    assert registry.make_agent(f"{tiny_run}:last@0", tell=told.append).name == (
        f"{tiny_run}:{newest}@0"
    )
    assert told == []  # a step was given: nothing to say
    assert registry.make_run_agent(tiny_run, step="last", sims=0).name == f"{tiny_run}:{newest}@0"
    assert registry.make_agent(f"{tiny_run}:best@0").name == f"{tiny_run}:{best}@0"
    named = registry.make_agent(f"{tiny_run}@0", tell=told.append)
    assert named.name == f"{tiny_run}:{best}@0"
    assert told == [registry.checkpoint_note(tiny_run, best, newest=f"{tiny_run}:last")]
    head = f"{tiny_run}: the best checkpoint by evaluation score, iteration {best} (score "
    assert told[0].startswith(head)
    tail = "which is also the newest" if best == newest else f"{tiny_run}:last plays it"
    assert told[0].endswith(tail)
    told.clear()
    registry.make_agents([f"{tiny_run}@0", f"{tiny_run}@2", "random"], tell=told.append)
    assert len(told) == 1  # one run, one line
    told.clear()
    registry.make_run_agent(tiny_run, sims=0, tell=told.append)
    assert told == [registry.checkpoint_note(tiny_run, best, newest=f"{tiny_run}:last")]
    registry.make_run_agent(tiny_run, step="last", sims=0, tell=told.append)
    assert len(told) == 1
