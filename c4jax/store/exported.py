"""An exported network: the network alone, as a few small files a user can ship.

``variables.msgpack`` (Flax msgpack of ``{'params', 'batch_stats'}``),
``config.json`` (the run's configuration), ``info.json`` (how it was made) and
``checksums.json`` (the SHA-256 of the first two, checked on every load).
``python -m c4jax.export network`` writes one from a run's checkpoint; the
shipped ``pretrained`` agent is one, inside the package.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import jax
import numpy as np
from flax import serialization

from c4jax.alphazero import config as config_lib
from c4jax.store import integrity
from c4jax.store.checkpoints import NetworkCheckpoint, _abstract_variables

PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"  # the shipped agent
VARIABLES_FILE = "variables.msgpack"  # an exported network: its variables,
CONFIG_FILE = "config.json"  # the run's configuration,
INFO_FILE = "info.json"  # how it was made (step, commit, wall time, results),
CHECKSUMS_FILE = "checksums.json"  # and the SHA-256 of the variables and the config
_CHECKED_FILES = (VARIABLES_FILE, CONFIG_FILE)  # what CHECKSUMS_FILE covers
_WRITTEN = (VARIABLES_FILE, CONFIG_FILE, INFO_FILE, CHECKSUMS_FILE)  # in the order put in place
_STAGING = ".export-"  # the folder inside ``out_dir`` where an export is written first
REINSTALL = "pip install --force-reinstall c4jax"


class DamagedExportError(ValueError):
    """A file of an exported network is damaged: unreadable, not what its checksum
    says, or holding NaN/infinite variables."""

    def __init__(self, path: Path, what: str):
        super().__init__(f"{path}: {what}")
        self.path = Path(path)
        self.what = what


class DamagedPretrainedError(DamagedExportError):
    """A file of the agent shipped in the package (``PRETRAINED_DIR``) is damaged;
    the fix is to reinstall c4jax."""

    def __init__(self, damaged: DamagedExportError):
        ValueError.__init__(
            self,
            f"the shipped pretrained agent is damaged ({damaged.path.name}: {damaged.what}): "
            f"reinstall c4jax ({REINSTALL})",
        )
        self.path = damaged.path
        self.what = damaged.what


def export_network(checkpoint: NetworkCheckpoint, out_dir: str | Path, info: dict) -> Path:
    """Writes a network alone (no optimizer, replay or games) as four small files.

    ``variables.msgpack`` (Flax msgpack of ``{'params', 'batch_stats'}``),
    ``config.json`` (the run's configuration), ``info.json`` (``info`` plus
    the step) and ``checksums.json`` (their SHA-256, but for ``info.json``,
    which one may edit). ``load_exported`` reads them back.

    The files are written in a folder inside ``out_dir`` first and renamed into
    place once all are on the disk: an export that fails (a full disk, Ctrl-C)
    leaves an export already there as it was.

    Returns:
        ``out_dir``.

    Raises:
        ValueError: a variable of the network is NaN or infinite (nothing is written).
        OSError: a file could not be written (an export already there is kept).
    """
    variables = jax.tree.map(np.asarray, jax.device_get(checkpoint.variables))
    bad = integrity.nonfinite_leaf(variables)
    if bad is not None:
        raise ValueError(
            f"the network of checkpoint {checkpoint.step} holds NaN or infinity ({bad}); "
            "export another step"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for left in out_dir.glob(_STAGING + "*"):  # from an export ended by a signal
        if left.is_dir() and not left.is_symlink():
            shutil.rmtree(left, ignore_errors=True)
    staged = Path(tempfile.mkdtemp(dir=out_dir, prefix=_STAGING))
    try:
        (staged / VARIABLES_FILE).write_bytes(serialization.msgpack_serialize(variables))
        config_lib.save(checkpoint.config, staged / CONFIG_FILE)
        (staged / INFO_FILE).write_text(
            json.dumps({"step": checkpoint.step, **info}, indent=2) + "\n")
        write_checksums(staged)
        for name in _WRITTEN:
            with open(staged / name, "rb+") as file:
                os.fsync(file.fileno())
        # Everything that can fail (a full disk) is behind us: the renames put the
        # new files in place at once, the checksums last.
        for name in _WRITTEN:
            os.replace(staged / name, out_dir / name)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return out_dir


def write_checksums(directory: str | Path) -> None:
    """Writes ``directory/checksums.json``: the SHA-256 of its variables and config."""
    directory = Path(directory)
    digests = {name: integrity.file_digest(directory / name) for name in _CHECKED_FILES}
    text = json.dumps({"algorithm": integrity.ALGORITHM, "files": digests}, indent=2)
    (directory / CHECKSUMS_FILE).write_text(text + "\n")


def is_exported(directory: str | Path) -> bool:
    """Whether ``directory`` holds a network written by ``export_network``."""
    return (Path(directory) / VARIABLES_FILE).is_file()


def load_exported(directory: str | Path | None = None) -> NetworkCheckpoint:
    """The network written by ``export_network`` (default: the packaged pretrained agent).

    Every load checks the files against ``checksums.json`` (an export of an
    older c4jax has none: then only the checks below) and the variables for
    NaN and infinity.

    Raises:
        DamagedPretrainedError: the shipped agent is damaged (its message says
            to reinstall c4jax).
        DamagedExportError: a file is unreadable or damaged (the message names it).
        ValueError: the files are missing, or the variables do not fit the
            stored network configuration.
    """
    shipped = directory is None or Path(directory).resolve() == Path(PRETRAINED_DIR).resolve()
    directory = Path(PRETRAINED_DIR if directory is None else directory)
    try:
        return _load(directory, checksums_needed=shipped)
    except DamagedExportError as err:
        if shipped:
            raise DamagedPretrainedError(err) from None
        raise


def _load(directory: Path, *, checksums_needed: bool) -> NetworkCheckpoint:
    missing = [f for f in (VARIABLES_FILE, CONFIG_FILE) if not (directory / f).is_file()]
    if missing and checksums_needed:
        raise DamagedExportError(directory / missing[0], "is missing")
    if missing:
        raise ValueError(f"{directory}: not an exported network (missing {', '.join(missing)})")
    _check_files(directory, needed=checksums_needed)
    config = _read_config(directory / CONFIG_FILE)
    try:
        variables = serialization.msgpack_restore((directory / VARIABLES_FILE).read_bytes())
    except Exception as err:  # msgpack raises several types on damaged data
        raise DamagedExportError(directory / VARIABLES_FILE, f"unreadable ({err})") from None
    expected = _abstract_variables(config.network)
    same = jax.tree.structure(expected) == jax.tree.structure(variables) and all(
        a.shape == np.shape(b)
        for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(variables), strict=True)
    )
    if not same:
        raise ValueError(f"{directory}: the variables do not fit the network in {CONFIG_FILE}")
    bad = integrity.nonfinite_leaf(variables)
    if bad is not None:
        raise DamagedExportError(directory / VARIABLES_FILE, f"{bad} holds NaN or infinity")
    step = _read_step(directory / INFO_FILE)
    variables = jax.tree.map(jax.numpy.asarray, variables)
    return NetworkCheckpoint(config=config, variables=variables, step=step)


def _check_files(directory: Path, *, needed: bool) -> None:
    """Compares the files with their SHA-256 in ``checksums.json`` (absent: nothing
    to compare, unless ``needed``)."""
    path = directory / CHECKSUMS_FILE
    if not path.is_file():
        if needed:
            raise DamagedExportError(path, "is missing")
        return
    try:
        stored = json.loads(path.read_text())
        digests = stored["files"]
        if stored.get("algorithm") != integrity.ALGORITHM or not isinstance(digests, dict):
            raise ValueError("not a c4jax checksum list")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise DamagedExportError(path, f"unreadable ({_one_line(err)})") from None
    for name in _CHECKED_FILES:
        if name not in digests:
            raise DamagedExportError(path, f"has no checksum of {name}")
        if integrity.file_digest(directory / name) != digests[name]:
            raise DamagedExportError(
                directory / name, f"does not match its SHA-256 in {CHECKSUMS_FILE}"
            )


def _read_config(path: Path) -> config_lib.Config:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"not a JSON object but {type(data).__name__}")
        return config_lib.from_dict(data)
    except (OSError, ValueError, TypeError, AttributeError) as err:
        raise DamagedExportError(
            path, f"not a readable c4jax configuration ({_one_line(err)})"
        ) from None


def _read_step(path: Path) -> int:
    """The ``step`` in ``info.json`` (0 without the file or the field)."""
    if not path.is_file():
        return 0
    try:
        info = json.loads(path.read_text())
        step = info.get("step", 0) if isinstance(info, dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"'step' is {step!r}, not a whole number")
    except (OSError, ValueError) as err:
        raise DamagedExportError(path, f"unreadable ({_one_line(err)})") from None
    return step


def _one_line(err: BaseException) -> str:
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    text = text or type(err).__name__
    return text if len(text) <= 150 else text[:147] + "..."
