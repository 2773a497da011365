"""The package's layers, read from its own imports: arrows run one way only.

Every module of ``c4jax`` belongs to one layer (``LAYERS``, in the order of the
README's layout table); a module may import its own layer and the layers listed
as below it, nothing else. Imports inside functions count too: a lazy import is
still a dependency. The rules, in words:

* base (the game, the fixed opponents, the replay buffer, typed configs) imports
  nothing above itself;
* the engines (``alphazero/``, ``dqn/``) import only base, and never each other;
* ``store/`` (what is kept on disk) sits above the engines; the players above it;
* ``judge/`` and ``web/`` never import ``run/`` or a command line;
* ``run/`` (the machinery of a running command and the two training loops) may
  use the judge; nothing in the library imports a command line;
* no two library packages import each other, and nothing imports ``bench`` or
  ``tests``.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "c4jax"

COMMAND_LINES = {
    "c4jax.__main__", "c4jax.train", "c4jax.evaluate", "c4jax.play", "c4jax.serve",
    "c4jax.export", "c4jax.plot", "c4jax.dqn.train",
}
PLAYERS = {"c4jax.player", "c4jax.dqn.player"}
BASE = {
    "c4jax.env", "c4jax.position", "c4jax.baselines", "c4jax.replay", "c4jax.schema",
    "c4jax.inputs",
}

# layer -> the layers it may import (besides itself)
LAYERS: dict[str, set[str]] = {
    "base": set(),
    "engine": {"base"},
    "store": {"base", "engine"},
    "players": {"base", "engine", "store"},
    "judge": {"base", "engine", "store", "players"},
    "web": {"base", "engine", "store", "players"},
    "run": {"base", "engine", "store", "players", "judge"},
    "package": {"base", "engine", "store", "players"},  # c4jax/__init__: c4jax.Player
    "command line": {"base", "engine", "store", "players", "judge", "web", "run"},
}


def layer(module: str) -> str:
    """The layer of a c4jax module (KeyError-free: unknown modules fail the test below)."""
    if module in COMMAND_LINES:
        return "command line"
    if module in PLAYERS:
        return "players"
    if module in BASE:
        return "base"
    if module == "c4jax":
        return "package"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ("alphazero", "dqn"):
        return "engine"
    if len(parts) >= 2 and parts[1] in ("store", "judge", "web", "run"):
        return parts[1]
    return "unclassified"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> set[str]:
    """The c4jax modules (and bench/tests) that ``path`` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # ``from c4jax.run import loop`` imports the module c4jax.run.loop
            names = [f"{node.module}.{a.name}" for a in node.names]
            names = [n if n in known else node.module for n in names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("c4jax", "bench", "tests"):
                while name not in known and "." in name:
                    name = name.rsplit(".", 1)[0]  # ``import c4jax.x.y`` or a name in a module
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, set(known)) - {name} for name, path in known.items()}


def test_every_module_has_a_layer():
    unclassified = [m for m in modules() if layer(m) == "unclassified"]
    assert not unclassified, f"give these modules a layer in tests/test_layout.py: {unclassified}"


def test_imports_point_down_the_layers_only():
    bad = []
    for module, targets in sorted(graph().items()):
        allowed = LAYERS.get(layer(module), set()) | {layer(module)}
        for target in sorted(targets):
            if target.split(".")[0] != "c4jax":
                bad.append(f"{module} imports {target} (c4jax never imports bench or tests)")
            elif layer(target) not in allowed:
                bad.append(f"{module} ({layer(module)}) imports {target} ({layer(target)})")
    assert not bad, "\n".join(bad)


def test_the_engines_do_not_import_each_other():
    bad = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if layer(module) == layer(target) == "engine"
        and module.split(".")[1] != target.split(".")[1]
    ]
    assert not bad, "\n".join(bad)


def package_of(module: str) -> str:
    """``c4jax.judge.registry`` -> ``c4jax.judge``; top-level modules stand alone."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else module


def test_no_two_library_packages_import_each_other():
    """Command lines are left out: ``dqn/train.py`` is a command that merely lives in dqn/."""
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        if layer(module) == "command line":
            continue
        for target in targets:
            if package_of(target) != package_of(module):
                edges.setdefault(package_of(module), set()).add(package_of(target))
    circles = [
        f"{a} <-> {b}"
        for a, b in itertools.combinations(sorted(edges), 2)
        if b in edges.get(a, set()) and a in edges.get(b, set())
    ]
    assert not circles, circles


@pytest.mark.parametrize(
    ("module", "target", "allowed"),
    [
        ("c4jax.alphazero.search", "c4jax.env", True),
        ("c4jax.alphazero.search", "c4jax.run.loop", False),
        ("c4jax.judge.registry", "c4jax.store.checkpoints", True),
        ("c4jax.judge.registry", "c4jax.run.rundir", False),
        ("c4jax.dqn.trainer", "c4jax.judge.arena", False),
        ("c4jax.run.loop", "c4jax.train", False),
        ("c4jax.train", "c4jax.run.loop", True),
    ],
)
def test_the_rules_themselves(module, target, allowed):
    """The checker is not vacuous: it tells a forbidden arrow from an allowed one."""
    assert (layer(target) in LAYERS[layer(module)] | {layer(module)}) is allowed
