"""The render cache returns exactly what a fresh rendering prints, and misses whenever an input changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from slurmgen import cli_fast, render_cache

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SLURMGEN_NO_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "jobs" / "gpu-1node-8gpu.yaml", tmp_path / "job.yaml")
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int | None, str, str]:
    code = cli_fast.run(["render", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def entries(workspace: Path) -> int:
    d = workspace / "cache" / "slurmgen" / "render"
    return len(list(d.iterdir())) if d.exists() else 0


def test_hit_prints_the_same(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = run(capsys, "job.yaml")
    assert entries(workspace) == 1
    second = run(capsys, "job.yaml")
    assert second == first
    assert entries(workspace) == 1


def test_inputs_change_the_key(workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = run(capsys, "job.yaml")
    assert run(capsys, "job.yaml", "--set", "nodes=2")[1] != base[1]
    spec = workspace / "job.yaml"
    spec.write_text(spec.read_text().replace("12:00:00", "11:00:00"))
    assert "--time='11:00:00'" in run(capsys, "job.yaml")[1]
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / "sbatch.sh.j2").write_text("#!/bin/bash\n# v1 {{ name }}\n{{ step }}\n")
    assert "# v1 llm-1node" in run(capsys, "job.yaml", "--templates", str(templates))[1]
    (templates / "sbatch.sh.j2").write_text("#!/bin/bash\n# v2 {{ name }}\n{{ step }}\n")
    assert "# v2 llm-1node" in run(capsys, "job.yaml", "--templates", str(templates))[1]
    assert entries(workspace) == 5


def test_failures_are_not_cached(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workspace / "bad.yaml").write_text("name: x\n")
    assert run(capsys, "bad.yaml")[0] == 2
    assert entries(workspace) == 0


def test_can_be_switched_off(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURMGEN_NO_CACHE", "1")
    assert run(capsys, "job.yaml")[0] == 0
    assert entries(workspace) == 0


def test_unwritable_cache_only_costs_speed(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-such-place")
    code, out, _ = run(capsys, "job.yaml")
    assert code == 0 and out.startswith("#!/bin/bash")


def test_key_covers_our_own_code(workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    before = render_cache.key("job.yaml", [], None)
    fake = tmp_path / "pkg"
    shutil.copytree(Path(render_cache.__file__).parent, fake, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(render_cache, "_PACKAGE", str(fake))
    monkeypatch.setattr(render_cache, "builtin_templates", lambda: str(ROOT / "templates"))
    same = render_cache.key("job.yaml", [], None)
    (fake / "spec.py").write_text((fake / "spec.py").read_text() + "\n# changed\n")
    assert render_cache.key("job.yaml", [], None) != same
    assert before is not None


def test_the_oldest_entries_go_past_the_limit(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keeps MAX_ENTRIES files, the newest; a repeated render of a kept one is still a hit."""
    monkeypatch.setattr(render_cache, "MAX_ENTRIES", 3)
    directory = workspace / "cache" / "slurmgen" / "render"
    order = []
    for nodes in range(1, 6):
        before = set(directory.iterdir()) if directory.exists() else set()
        assert run(capsys, "job.yaml", "--set", f"nodes={nodes}")[0] == 0
        (new,) = set(directory.iterdir()) - before
        os.utime(new, (1_000 + nodes, 1_000 + nodes))  # distinct ages whatever the file system's clock grain
        order.append(new)
    assert sorted(directory.iterdir()) == sorted(order[2:])
    assert run(capsys, "job.yaml", "--set", "nodes=5")[0] == 0
    assert sorted(directory.iterdir()) == sorted(order[2:])


def test_submit_job_sidecars_are_pruned_too(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render_cache, "MAX_ENTRIES", 2)
    for nodes in range(1, 6):
        script = cli_fast.load_for_submit("job.yaml", [f"nodes={nodes}"], None)[1]
        assert f"--nodes={nodes}" in script
    sidecars = list((workspace / "cache" / "slurmgen" / "submit").iterdir())
    assert len(sidecars) == 2
    assert entries(workspace) == 2
