"""An exported network: the network alone, as three small files a user can ship.

``variables.msgpack`` (Flax msgpack of ``{'params', 'batch_stats'}``),
``config.json`` (the run's configuration) and ``info.json`` (how it was made).
``python -m c4jax.export network`` writes one from a run's checkpoint; the
shipped ``pretrained`` agent is one, inside the package.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
from flax import serialization

from c4jax.alphazero import config as config_lib
from c4jax.store.checkpoints import NetworkCheckpoint, _abstract_variables

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"  # the shipped agent
VARIABLES_FILE = "variables.msgpack"  # an exported network: its variables,
CONFIG_FILE = "config.json"  # the run's configuration,
INFO_FILE = "info.json"  # and how it was made (step, commit, wall time, results)


def export_network(checkpoint: NetworkCheckpoint, out_dir: str | Path, info: dict) -> Path:
    """Writes a network alone (no optimizer, replay or games) as three small files.

    ``variables.msgpack`` (Flax msgpack of ``{'params', 'batch_stats'}``),
    ``config.json`` (the run's configuration) and ``info.json`` (``info`` plus
    the step). ``load_exported`` reads them back.

    Returns:
        ``out_dir``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    variables = jax.tree.map(np.asarray, jax.device_get(checkpoint.variables))
    (out_dir / VARIABLES_FILE).write_bytes(serialization.msgpack_serialize(variables))
    config_lib.save(checkpoint.config, out_dir / CONFIG_FILE)
    (out_dir / INFO_FILE).write_text(json.dumps({"step": checkpoint.step, **info}, indent=2) + "\n")
    return out_dir


def is_exported(directory: str | Path) -> bool:
    """Whether ``directory`` holds a network written by ``export_network``."""
    return (Path(directory) / VARIABLES_FILE).is_file()


def load_exported(directory: str | Path = PRETRAINED_DIR) -> NetworkCheckpoint:
    """The network written by ``export_network`` (default: the packaged pretrained agent).

    Raises:
        ValueError: the files are missing, or the variables do not fit the
            stored network configuration.
    """
    directory = Path(directory)
    missing = [f for f in (VARIABLES_FILE, CONFIG_FILE) if not (directory / f).is_file()]
    if missing:
        raise ValueError(f"{directory}: not an exported network (missing {', '.join(missing)})")
    config = config_lib.load(str(directory / CONFIG_FILE))
    try:
        variables = serialization.msgpack_restore((directory / VARIABLES_FILE).read_bytes())
    except Exception as err:  # msgpack raises several types on damaged data
        raise ValueError(f"{directory / VARIABLES_FILE}: unreadable ({err})") from None
    expected = _abstract_variables(config.network)
    same = jax.tree.structure(expected) == jax.tree.structure(variables) and all(
        a.shape == np.shape(b)
        for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(variables), strict=True)
    )
    if not same:
        raise ValueError(f"{directory}: the variables do not fit the network in {CONFIG_FILE}")
    info_path = directory / INFO_FILE
    step = json.loads(info_path.read_text()).get("step", 0) if info_path.is_file() else 0
    variables = jax.tree.map(jax.numpy.asarray, variables)
    return NetworkCheckpoint(config=config, variables=variables, step=int(step))
