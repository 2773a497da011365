"""``python -m c4jax.dqn.train`` (``c4jax dqn-train``): train a value-based agent.

Usage:
    python -m c4jax.dqn.train --config grogu      # the linear "Grogu" (~10 minutes)
    python -m c4jax.dqn.train --config ddqn       # the Double DQN "Yoda" MLP (~30 minutes)
    python -m c4jax.dqn.train --config qlearning  # plain Q-learning: no double Q, no target net
    python -m c4jax.dqn.train --config ddqn --train.opponent-self 0 --model.hidden 256,256
    python -m c4jax.dqn.train --workdir runs/X    # continue runs/X
    python -m c4jax.dqn.train --resume            # continue the newest value-based run in runs/
    python -m c4jax.dqn.train --help              # every option

The same command line as ``python -m c4jax.train`` (``c4jax.run.train_command.train_main``),
which also trains these runs (``--config dqn/grogu``, ``--workdir``, ``--resume``);
this one takes value-based runs only and says which command continues an
AlphaZero one. The same run directory (``config.json``, ``metrics.jsonl``,
``tb/``, ``checkpoints/``, the lock), the same Ctrl-C, SIGTERM and SIGHUP (save, print
the command that continues, exit 130, 143 or 129), the same damaged-checkpoint
fallback and NaN guard (exit 1), bad input one ``error:`` line (exit 2), a full disk
or an unwritable file one ``error:`` line (exit 74), the same refusal of a
``--workdir`` of someone else's files (``--force-workdir``). The agent of a run is the agent
spec ``dqn:RUN_DIR`` (or just ``RUN_DIR``) in ``evaluate`` and ``play``. The
library call is ``c4jax.run.train_dqn.train_and_evaluate``.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads, so a Ctrl-C while importing exits cleanly too
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted before training started.")

import sys

from c4jax.run import train_command


def parse_args(argv: list[str]) -> train_command.Invocation:
    """What the command line asks for (see ``train_command.parse_train_args``); nothing starts."""
    return train_command.parse_train_args(argv, "dqn")


def main(argv: list[str] | None = None) -> int:
    return train_command.train_main(argv, "dqn")


if __name__ == "__main__":
    sys.exit(main())
