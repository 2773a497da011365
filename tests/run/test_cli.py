"""Command-line helpers (``c4jax.run.cli``): tyro's parse errors as one ``error:`` line with
tyro's own suggestions, for the trainers' command lines and for tyro_cli alone."""


import pytest

from c4jax import train
from c4jax.dqn import train as dqn_train
from c4jax.run import cli, train_command


def _error(main, argv, capsys) -> str:
    """``main(argv)``'s stderr, which must be one ``error:`` line with exit code 2."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "\u2500" not in err  # no tyro panel
    return err


@pytest.mark.parametrize("main, prog", [(train.main, "python -m c4jax.train"),
                                        (dqn_train.main, "python -m c4jax.dqn.train")])
def test_a_misspelt_flag_is_one_line_with_tyros_suggestion(main, prog, tmp_path, capsys):
    config = "tiny"
    err = _error(main, ["--config", config, "--workdir", str(tmp_path),
                        "--train.num-iteration", "5"], capsys)
    assert "--train.num-iteration" in err
    assert "perhaps you meant --train.num-iterations?" in err
    assert f"(see: {prog} --help)" in err
    err = _error(main, ["--config", config, "--workdri", str(tmp_path)], capsys)
    assert "perhaps you meant --workdir?" in err


@pytest.mark.parametrize("argv, flag", [
    (["--seed", "abc"], "--seed"),
    (["--train.learning-rate", "fast"], "--train.learning-rate"),
    (["--train.num-iterations", "2.5"], "--train.num-iterations"),
])
def test_a_wrong_type_is_one_line_naming_the_flag(argv, flag, tmp_path, capsys):
    err = _error(train.main, ["--config", "tiny", "--workdir", str(tmp_path), *argv], capsys)
    assert err.startswith(f"error: {flag}: ")


def test_other_parse_errors_are_one_line(tmp_path, capsys):
    base = ["--config", "tiny", "--workdir", str(tmp_path)]
    err = _error(train.main, [*base, "--search.algorithm", "alphabeta"], capsys)
    assert "--search.algorithm: invalid choice 'alphabeta'; expected one of: gumbel, puct" in err
    err = _error(train.main, [*base, "--seed"], capsys)
    assert "--seed: expected a value" in err
    err = _error(train.main, ["--workdir", str(tmp_path), "--config"], capsys)
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
