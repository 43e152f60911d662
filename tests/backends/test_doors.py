"""The doors of the job interface: the CLI's job commands (tests/cli/test_cli_job_interface.py) and the Python API
(`slurmgen.submit`, `Job`, `Sweep`) ask the backend registry and its handles, and never branch on the kind of job;
a new kind of job is one module and one registry row."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import slurmgen
from slurmgen.backends import registry

API = Path(slurmgen.__file__).parent / "api"
# a kind's own code, and the words that tell one kind from another (`profile.host`, `target.local`)
KIND_CODE = ("slurmgen.local", "slurmgen.remote", "slurmgen.backends.slurm_here", "slurmgen.backends.slurm_ssh",
             "slurmgen.backends.emulated")  # fmt: skip
KIND_WORDS = {"host", "local", "remote", "slurm", "ssh"}


def kind_branches(tree: ast.Module) -> list[str]:
    """Where code imports a kind's own module, reads an attribute named after a kind or compares with its name;
    what only annotations import (under TYPE_CHECKING) is no branch."""
    typing_only = {id(n) for top in tree.body if isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test)
                   for n in ast.walk(top)}  # fmt: skip
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(KIND_CODE):
            found.append(f"{node.lineno}: import {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr in KIND_WORDS:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Compare):
            words = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
            found += [f"{node.lineno}: == {w!r}" for w in words if isinstance(w, str) and w.lower() in KIND_WORDS]
    return found


@pytest.mark.parametrize("name", ["submitting.py", "job.py", "sweep.py", "query.py"])
def test_the_python_api_never_branches_on_the_kind_of_job(name: str) -> None:
    assert kind_branches(ast.parse((API / name).read_text())) == []


def test_the_check_sees_the_branches_the_api_had() -> None:
    before = ast.parse(
        "def submit(cluster):\n"
        "    if source.profile is not None and source.profile.host is not None:\n"
        "        refusal = 'over ssh'\n"
        "    from slurmgen.backends.slurm_ssh.placing import send_remote\n"
    )
    assert sorted(kind_branches(before)) == ["2: .host", "4: import slurmgen.backends.slurm_ssh.placing"]


def test_every_kind_of_the_registry_makes_a_backend_that_names_itself() -> None:
    from slurmgen.spec.profile import ClusterProfile

    ssh = ClusterProfile("alpha", "clusters.yaml", "login.example", "/work", {})
    for name in registry.KINDS:
        backend = registry.backend_named(name, ssh if name == "ssh" else None)
        assert backend.name == name
        assert all(line and "\n" not in line for line in backend.cannot.values())
    assert registry.backend_for(None).name == "slurm" and registry.backend_for(ssh).name == "ssh"
