"""Command-line helpers (``c4jax.run.cli``): tyro's parse errors as one ``error:`` line with
tyro's own suggestions, for the trainers' command lines and for tyro_cli alone."""


import pytest

from c4jax import train
from c4jax.dqn import train as dqn_train
from c4jax.run import cli, train_command


@pytest.mark.parametrize("main, prog", [(train.main, "python -m c4jax.train"),
                                        (dqn_train.main, "python -m c4jax.dqn.train")])
def test_a_misspelt_flag_is_one_line_with_tyros_suggestion(main, prog, tmp_path, error_line):
    config = "tiny"
    err = error_line(main, ["--config", config, "--workdir", str(tmp_path),
                        "--train.num-iteration", "5"])
    assert "--train.num-iteration" in err
    assert "perhaps you meant --train.num-iterations?" in err
    assert f"(see: {prog} --help)" in err
    err = error_line(main, ["--config", config, "--workdri", str(tmp_path)])
    assert "perhaps you meant --workdir?" in err


@pytest.mark.parametrize("argv, flag", [
    (["--seed", "abc"], "--seed"),
    (["--train.learning-rate", "fast"], "--train.learning-rate"),
    (["--train.num-iterations", "2.5"], "--train.num-iterations"),
])
def test_a_wrong_type_is_one_line_naming_the_flag(argv, flag, tmp_path, error_line):
    err = error_line(train.main, ["--config", "tiny", "--workdir", str(tmp_path), *argv])
    assert err.startswith(f"error: {flag}: ")


def test_other_parse_errors_are_one_line(tmp_path, error_line):
    base = ["--config", "tiny", "--workdir", str(tmp_path)]
    err = error_line(train.main, [*base, "--search.algorithm", "alphabeta"])
    assert "--search.algorithm: invalid choice 'alphabeta'; expected one of: gumbel, puct" in err
    err = error_line(train.main, [*base, "--seed"])
    assert "--seed: expected a value" in err
    err = error_line(train.main, ["--workdir", str(tmp_path), "--config"])
    assert "--config: expected one argument" in err
    assert not any(tmp_path.iterdir())


def test_tyro_cli_raises_one_value_error_and_leaves_help_alone(capsys):
    with pytest.raises(ValueError, match=r"perhaps you meant --train\.num-iterations\?"):
        cli.tyro_cli(train_command.AlphaZeroCommand, args=["--train.num-iteration", "3"], prog="p")
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as stop:
        cli.tyro_cli(train_command.AlphaZeroCommand, args=["--help"], prog="p")
    assert stop.value.code == 0 and "--train.num-iterations" in capsys.readouterr().out


def test_known_flags_and_suggestions():
    flags = cli.known_flags(train_command.AlphaZeroCommand)
    for flag in ("--config", "--workdir", "--resume", "--coordinator", "--seed",
                 "--train.num-iterations", "--network.bfloat16", "--network.no-bfloat16",
                 "--distributed", "--no-distributed"):
        assert flag in flags, flag
    assert "--no-resume" not in flags and "--run.seed" not in flags
    assert "--model.hidden" in cli.known_flags(train_command.ValueBasedCommand)
    assert cli.suggest("--train.num-iteration", flags)[0] == "--train.num-iterations"
    assert cli.suggest("--train.bogus", flags) == []
