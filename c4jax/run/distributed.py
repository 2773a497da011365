"""Runs over several processes (hosts): how each process finds the others.

One process per host (or per GPU) runs the same command; ``jax.distributed``
joins them, and the training mesh then spans every process's devices.

    cluster = Cluster(coordinator="10.0.0.1:1234", num_processes=2, process_id=0)
    initialize(cluster)        # before anything asks JAX about devices

Under a cluster manager (SLURM, Open MPI, a Cloud TPU pod) every field may stay
None: JAX then detects them. ``JAX_COORDINATOR_ADDRESS`` in the environment
stands for ``coordinator`` (JAX reads it itself).

Only the standard library at import: a command line can parse its flags before
JAX loads.
"""

from __future__ import annotations

import dataclasses
import re

FLAGS = ("--coordinator", "--num-processes", "--process-id")
_HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Where this process stands in a multi-process run (None: let JAX detect it)."""

    coordinator: str | None = None
    """HOST:PORT of the coordinator service that process 0 starts (all processes give
    the same; HOST must be reachable from every host)."""
    num_processes: int | None = None
    """How many processes take part (one per host, or per GPU)."""
    process_id: int | None = None
    """This process's number, 0..num_processes - 1; process 0 writes the logs."""


def validate(cluster: Cluster) -> Cluster:
    """Raises ValueError naming the flag of an impossible value; returns ``cluster``."""
    c = cluster
    if c.coordinator is not None:
        match = _HOST_PORT.match(c.coordinator)
        if match is None or not 1 <= int(match.group(1)) <= 65535:
            raise ValueError(
                f"--coordinator: got {c.coordinator!r}, allowed: HOST:PORT with a port "
                "in 1..65535 (e.g. 10.0.0.1:1234)"
            )
    if c.num_processes is not None and c.num_processes < 1:
        raise ValueError(f"--num-processes: got {c.num_processes}, allowed: an integer >= 1")
    if c.process_id is not None:
        if c.process_id < 0:
            raise ValueError(f"--process-id: got {c.process_id}, allowed: an integer >= 0")
        if c.num_processes is not None and c.process_id >= c.num_processes:
            raise ValueError(
                f"--process-id: got {c.process_id}, allowed: 0..{c.num_processes - 1} "
                f"(--num-processes is {c.num_processes})"
            )
    return cluster


def parse_flags(argv: list[str]) -> tuple[Cluster | None, list[str]]:
    """Takes ``--coordinator``, ``--num-processes`` and ``--process-id`` out of ``argv``.

    Accepts ``--flag VALUE`` and ``--flag=VALUE``.

    Returns:
        ``(cluster, rest)``: the validated ``Cluster`` (None when no flag was
        given) and the other arguments, in order.

    Raises:
        ValueError: a flag without a value, a number that is not an integer,
            or an impossible value (``validate``).
    """
    values: dict[str, str] = {}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name not in FLAGS:
            rest.append(arg)
            continue
        if not eq:
            value = next(args, None)
            if value is None or value.startswith("--"):
                raise ValueError(f"{name}: expected a value")
        values[name] = value
    if not values:
        return None, rest
    numbers = {}
    for name in ("--num-processes", "--process-id"):
        if name in values:
            try:
                numbers[name] = int(values[name])
            except ValueError:
                raise ValueError(
                    f"{name}: got {values[name]!r}, allowed: an integer"
                ) from None
    cluster = Cluster(
        coordinator=values.get("--coordinator"),
        num_processes=numbers.get("--num-processes"),
        process_id=numbers.get("--process-id"),
    )
    return validate(cluster), rest


def initialize(cluster: Cluster | None = None) -> None:
    """``jax.distributed.initialize`` with ``cluster``'s fields (None: detected).

    Call it once per process, before anything asks JAX about devices. On a CPU
    the processes exchange data through gloo (TCP).

    JAX's preemption service is turned off: its C-level SIGTERM handler would
    replace c4jax's (``interrupt``), so that a SIGTERM while the run starts (or
    loads a checkpoint) would be swallowed without a word, and during training
    it would catch SIGTERM only, say nothing and stop one iteration later (at
    ``reached_preemption_sync_point``'s step). c4jax's own stop covers SIGTERM,
    SIGHUP and Ctrl-C on any process with one all-gather per iteration
    (``loop.stopped_by``), and every process saves the checkpoint of the same
    iteration; Orbax's preemption check then answers False (it saves with
    ``force=True`` anyway).

    Raises:
        ValueError: one line saying what failed and what to give.
    """
    import jax

    cluster = cluster or Cluster()
    jax.config.update("jax_enable_preemption_service", False)
    try:
        jax.distributed.initialize(
            coordinator_address=cluster.coordinator,
            num_processes=cluster.num_processes,
            process_id=cluster.process_id,
        )
    except (RuntimeError, ValueError, TypeError) as err:
        first = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(
            f"--distributed: jax.distributed.initialize() failed ({first}); run one process "
            "per host under a cluster manager (SLURM, a TPU pod), or give every process "
            "--coordinator HOST:PORT --num-processes N --process-id I (see the README); "
            "--no-distributed runs in this process alone"
        ) from None
