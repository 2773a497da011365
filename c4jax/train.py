"""``python -m c4jax.train`` (``c4jax train``): train an agent, AlphaZero or value-based.

Usage:
    python -m c4jax.train                      # preset for the hardware found
    python -m c4jax.train --config tiny        # or configs/tiny.json
    python -m c4jax.train --config cpu --train.num-iterations 50 --seed 3
    python -m c4jax.train --config dqn/grogu   # a value-based preset (c4jax/configs/dqn/)
    python -m c4jax.train --workdir runs/X     # continue runs/X if it has checkpoints
    python -m c4jax.train --resume             # continue the newest run in runs/, either kind
    python -m c4jax.train --distributed        # one process per host (SLURM, TPU pod)
    python -m c4jax.train --coordinator HOST:PORT --num-processes N --process-id I
    python -m c4jax.train --help               # every option, with the defaults in effect

Which trainer runs comes from the run directory's ``config.json`` (``"algorithm":
"dqn"`` marks a value-based run) or from ``--config``; ``python -m c4jax.dqn.train``
is the same command line for value-based runs only. A misspelt or ill-typed flag
is one ``error:`` line (with tyro's suggestion), exit code 2.

A run directory holds ``config.json``, ``metrics.jsonl``, TensorBoard event
files (``tb/``) and Orbax checkpoints (``checkpoints/``, each with the SHA-256 of
its arrays and files, checked on every read). Ctrl-C, SIGTERM (Colab, SLURM,
Kubernetes, ``docker stop``) or SIGHUP (a closed terminal) finishes the iteration,
saves a checkpoint and exits (code 130, 143 or 129; a second signal aborts at
once); running again
with the same ``--workdir`` continues bit-for-bit where it stopped. A lock file
keeps a second trainer out of a directory in use; a damaged newest checkpoint
is moved to ``damaged-checkpoints/`` and the run continues from the newest good
one; a NaN/inf loss stops the run without saving the broken state (exit 1).
A full disk, a quota or a file that cannot be written stops the run with one
``error:`` line naming the file and the newest checkpoint saved (exit 74, EX_IOERR);
nothing half-written is left for the resume. A ``--workdir`` that holds files but
is not a c4jax run is refused (``--force-workdir`` uses it anyway); a
``metrics.jsonl`` deleted during the run is written again, whole.

Several processes (``c4jax.run.distributed``) train as one: process 0 alone locks
the directory, logs and prints; all write the checkpoints together, and each
evaluates on its own copy of the network. A Ctrl-C or SIGTERM on any of them stops all
at the same iteration; one that dies ends the others with an error.

The flow is ``c4jax.run.train_command.train_main``; the library call is
``c4jax.run.train_alphazero.train_and_evaluate``.
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads, so a Ctrl-C while importing exits cleanly too
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted before training started.")

import sys

from c4jax.run import train_command


def parse_args(argv: list[str]) -> train_command.Invocation:
    """What the command line asks for (see ``train_command.parse_train_args``); nothing starts."""
    return train_command.parse_train_args(argv, "alphazero")


def main(argv: list[str] | None = None) -> int:
    return train_command.train_main(argv, "alphazero")


if __name__ == "__main__":
    sys.exit(main())
