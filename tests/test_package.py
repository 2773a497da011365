"""The package as a user installs it: its version, the JAX it needs (and the message when a
runtime's is older), every library it imports declared, a typed package, a license, and
the pins of constraints.txt inside pyproject's ranges."""

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import c4jax

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
# Imported only where an extra's feature is used, each with an error naming the extra.
OPTIONAL_IMPORTS = {"bitbully": "solver", "onnx": "export"}


def _requirements(specs) -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, specs)}


CORE = _requirements(PROJECT["dependencies"])


def test_the_version_is_the_installed_distribution_s():
    assert c4jax.__version__ == metadata.version("c4jax") == PROJECT["version"]


def test_min_jax_is_pyproject_s_bound_for_jax_and_its_cuda_and_tpu_builds():
    assert CORE["jax"].specifier == f">={c4jax.MIN_JAX}"
    for extra in ("cuda", "tpu"):
        (jax,) = map(Requirement, PROJECT["optional-dependencies"][extra])
        assert jax.name == "jax" and str(jax.specifier) == f">={c4jax.MIN_JAX}", extra


@pytest.mark.parametrize("version", ["0.6.1", "0.10.2", "1.0", "0.7.0.dev20250601", "0.6.1rc1"])
def test_a_recent_enough_jax_passes(version):
    c4jax.check_jax(version)


@pytest.mark.parametrize("version", ["0.4.33", "0.6.0", "0.5.3.dev20250101+abc"])
def test_an_older_jax_fails_with_the_fix(version):
    with pytest.raises(ImportError) as err:
        c4jax.check_jax(version)
    assert str(err.value).startswith(
        f"c4jax needs jax>={c4jax.MIN_JAX}; this runtime has jax {version}"
    )
    assert f"pip install -U 'jax>={c4jax.MIN_JAX}'" in str(err.value)


def test_the_installed_jax_is_checked_at_import(monkeypatch):
    monkeypatch.setattr(c4jax, "_jax_version", lambda: "0.4.33")
    with pytest.raises(ImportError, match=r"this runtime has jax 0\.4\.33"):
        c4jax.check_jax()


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu", **env},
    )


def test_importing_c4jax_under_an_old_jax_is_one_clear_error(tmp_path):
    # A runtime whose preinstalled jax is older (a stand-in module, first on the path).
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text('__version__ = "0.4.33"\n')
    out = _python("import jax, c4jax", PYTHONPATH=str(tmp_path))
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: c4jax needs jax>={c4jax.MIN_JAX}; this runtime has "
                           "jax 0.4.33"), out.stderr


def test_importing_c4jax_stays_light():
    out = _python("import sys, c4jax; print(sorted({'jax', 'flax', 'c4jax.player'} "
                  "& set(sys.modules)), c4jax.__version__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", metadata.version("c4jax")]


def _imported_distributions() -> dict[str, set[str]]:
    """{distribution: modules of c4jax importing it} for every third-party import."""
    dists = metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in (ROOT / "c4jax").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "c4jax" or top in sys.stdlib_module_names:
                    continue
                if top in OPTIONAL_IMPORTS and top not in dists:  # its extra not installed
                    found.setdefault(canonicalize_name(top), set()).add(top)
                    continue
                assert top in dists, f"{path}: {top} is not installed"
                for dist in dists[top]:
                    found.setdefault(canonicalize_name(dist), set()).add(top)
    return found


def test_every_imported_library_is_declared_and_every_dependency_imported():
    imported = _imported_distributions()
    extras = PROJECT["optional-dependencies"]
    for dist, modules in imported.items():
        optional = {OPTIONAL_IMPORTS.get(m) for m in modules} - {None}
        if optional:
            (extra,) = optional
            assert dist in _requirements(extras[extra]), f"{dist} not in the [{extra}] extra"
            assert dist not in CORE, dist
        else:
            assert dist in CORE, f"c4jax imports {sorted(modules)} ({dist}): not declared"
    assert set(CORE) <= set(imported), f"declared, never imported: {set(CORE) - set(imported)}"


def test_the_user_facing_extras_hold_no_test_tool():
    assert "onnxruntime" not in _requirements(PROJECT["optional-dependencies"]["export"])
    assert "chex" not in CORE  # the tests' assertions: dev only


def test_orbax_has_an_upper_bound_since_the_damage_checks_read_its_layout():
    orbax = CORE["orbax-checkpoint"]
    assert any(s.operator == "<" for s in orbax.specifier), orbax
    assert orbax.specifier.contains(metadata.version("orbax-checkpoint")), "tested version"


def test_a_typed_package_with_its_license():
    assert (ROOT / "c4jax" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["c4jax"]
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text  # the wheel's metadata: tests/test_wheel.py


def test_constraints_pin_every_dependency_inside_pyproject_s_ranges():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line).groups()
            pins[canonicalize_name(name)] = version
    ranges = dict(CORE)
    for extra in ("solver", "tensorboard", "export"):
        ranges.update(_requirements(PROJECT["optional-dependencies"][extra]))
    for name, requirement in ranges.items():
        assert name in pins, f"constraints.txt does not pin {name}"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])
    assert "jaxlib" in pins and pins["jaxlib"] == pins["jax"]


def test_player_is_in_the_package_s_dir():
    """``Player`` is imported lazily: without ``__dir__`` tab completion missed it."""
    import c4jax

    assert "Player" in dir(c4jax) and "__version__" in dir(c4jax)
