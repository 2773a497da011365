"""The documentation site (mkdocs.yml, docs/): it builds with --strict, every page is
in the nav, and a broken link or a page left out of the nav fails the build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')"
)
import yaml  # noqa: E402  (a dependency of mkdocs)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "mkdocs.yml"
DOCS = ROOT / "docs"


def nav_pages(nav) -> list[str]:
    """The page paths of a mkdocs nav (nested sections flattened; external links left out)."""
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages += nav_pages(value)
        elif "://" not in value:
            pages.append(value)
    return pages


def load_config() -> dict:
    return yaml.safe_load(CONFIG.read_text())


def build(project: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the project in ``project``, the site written to ``site``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages(load_config()["nav"])
    assert len(nav) == len(set(nav)), f"a page is in the nav twice: {nav}"
    missing = [page for page in nav if not (DOCS / page).is_file()]
    assert not missing, f"nav entries without a file in docs/: {missing}"
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    left_out = sorted(set(pages) - set(nav))
    assert not left_out, f"pages in docs/ missing from the nav of mkdocs.yml: {left_out}"


def test_the_nav_has_the_pages_the_readme_links_to():
    nav = set(nav_pages(load_config()["nav"]))
    expected = {
        "index.md", "getting-started.md", "training.md", "evaluation.md", "playing.md",
        "value-based.md", "scaling.md", "results.md", "design.md", "experiments.md",
        "api.md", "changelog.md",
    }
    assert expected <= nav, f"missing from the nav: {sorted(expected - nav)}"


def api_objects() -> list[str]:
    """The dotted names that docs/api.md renders with mkdocstrings (``::: name``)."""
    return re.findall(r"^::: ([\w.]+)", (DOCS / "api.md").read_text(), flags=re.M)


@pytest.mark.slow
def test_the_site_builds_with_strict(tmp_path):
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed")
    site = tmp_path / "site"
    result = build(ROOT, site)
    assert result.returncode == 0, result.stdout + result.stderr
    for page in nav_pages(load_config()["nav"]):
        html = site / ("index.html" if page == "index.md" else page[:-3] + "/index.html")
        assert html.is_file(), f"{page} was not rendered"
    # The API reference is generated from the docstrings: every object is on the page.
    api = (site / "api" / "index.html").read_text()
    objects = api_objects()
    assert len(objects) >= 10
    for name in objects:
        assert f'id="{name}"' in api or f'id="{name}.' in api, f"{name} not rendered"
    assert "from_checkpoint" in api and "num_simulations" in api


def copy_project(dest: Path) -> Path:
    """What the build reads, copied (the package linked) into ``dest``."""
    dest.mkdir()
    shutil.copy(CONFIG, dest / "mkdocs.yml")
    shutil.copytree(DOCS, dest / "docs")
    if (ROOT / "CHANGELOG.md").exists():
        shutil.copy(ROOT / "CHANGELOG.md", dest / "CHANGELOG.md")
    (dest / "c4jax").symlink_to(ROOT / "c4jax", target_is_directory=True)
    return dest


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage, expected",
    [
        ("link", "no-such-page.md"),
        ("anchor", "#no-such-section"),
        ("orphan", "orphan.md"),
        ("include", "NO-SUCH-FILE.md"),
    ],
)
def test_a_broken_site_fails_the_strict_build(tmp_path, damage, expected):
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed")
    project = copy_project(tmp_path / "project")
    docs = project / "docs"
    if damage == "link":
        with (docs / "index.md").open("a") as f:
            f.write("\nSee [a page that is not there](no-such-page.md).\n")
    elif damage == "anchor":
        with (docs / "index.md").open("a") as f:
            f.write("\nSee [a section that is not there](training.md#no-such-section).\n")
    elif damage == "orphan":
        (docs / "orphan.md").write_text("# A page that is not in the nav\n")
    else:
        with (docs / "changelog.md").open("a") as f:
            f.write('\n--8<-- "NO-SUCH-FILE.md"\n')
    result = build(project, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert expected in output, output
