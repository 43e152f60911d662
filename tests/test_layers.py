"""One package per process, and imports point down only (README, "Where things live"):

    slurmgen.runtime  (the user's program)   may use slurmgen.task and the shared modules
    slurmgen.batch    (the batch shell)       may use the shared modules and the checkpoint file names
    slurmgen.task     (each task)             may use the shared modules only
    shared: slurmgen/*.py, slurmgen/slurm/    use none of the three

Read from the source, function-level and TYPE_CHECKING imports included: an arrow is an arrow, whenever it runs."""

from __future__ import annotations

import pytest
from import_graph import PACKAGE, closure, graph, modules, within

BATCH, TASK, RUNTIME = "slurmgen.batch", "slurmgen.task", "slurmgen.runtime"
LEGACY = ("slurmgen.runtime.batch", "slurmgen.runtime.launch")  # forwarders of the old entry points

# package -> (packages it must not import, single modules it may import from those anyway)
FORBIDDEN = {
    TASK: ((BATCH, RUNTIME), ()),
    RUNTIME: ((BATCH,), ()),
    # The batch shell reads the checkpoint layout (standard library only) to remove a finished job's state and to
    # size the newest checkpoint for the node checks' room test (batch/nodes.py).
    BATCH: (
        (TASK, RUNTIME),
        (
            "slurmgen.runtime.checkpoint.layout",
            "slurmgen.runtime.checkpoint",
            RUNTIME,
        ),
    ),
}


def shared(name: str) -> bool:
    """slurmgen's own top-level modules (slurmgen/contract.py, ...; not its subpackages) and slurmgen.slurm."""
    path = modules()[name]
    return (path.parent == PACKAGE and path.stem not in ("__init__", "__main__")) or within(name, "slurmgen.slurm")


def arrows_up(package: str) -> list[str]:
    banned, allowed = FORBIDDEN[package]
    found = []
    for name, targets in graph().items():
        if not within(name, package) or any(within(name, legacy) for legacy in LEGACY):
            continue
        found += [f"{name} -> {t}" for t in sorted(targets) if t not in allowed and any(within(t, b) for b in banned)]
    return found


@pytest.mark.parametrize("package", list(FORBIDDEN))
def test_a_process_package_imports_down_only(package: str) -> None:
    assert arrows_up(package) == []


def test_shared_modules_import_no_process_package() -> None:
    found = [
        f"{name} -> {target}"
        for name, targets in graph().items()
        if shared(name)
        for target in sorted(targets)
        if any(within(target, p) for p in (BATCH, TASK, RUNTIME))
    ]
    assert found == []


def test_the_graph_sees_the_arrows_it_checks() -> None:
    """The reader is not blind: known arrows of each kind are there (top-level, lazy, `from pkg import mod`)."""
    arrows = graph()
    assert "slurmgen.task.prepare" in arrows["slurmgen.runtime.dist"]
    assert "slurmgen.runtime.checkpoint.layout" in arrows["slurmgen.batch.commands"]  # inside a function
    assert "slurmgen.batch.task_failure" in arrows["slurmgen.batch.restart"]  # `from slurmgen.batch import ...`
    assert "slurmgen.batch.commands" in arrows["slurmgen.runtime.batch.__main__"]  # the legacy forwarder


def test_no_circle_at_import() -> None:
    """No module reaches itself again through the imports that run when it is imported (the house's rule of 0
    circles; a function-level import that points back is allowed: it runs after both modules exist)."""
    arrows = graph("import")
    circles = [name for name in arrows if name in closure(sorted(arrows[name]), arrows)]
    assert circles == []


def test_the_interruption_policy_imports_only_its_vocabulary() -> None:
    """The policy is pure (slurmgen/interruption/__init__.py): the standard library, its own modules and the
    standard-library leaves that name what it decides on. The facts that need Slurm's own parsing (a version) are
    passed in by the processes that ask it, so no arrow goes from the policy to slurmgen.slurm or further up."""
    allowed = ("slurmgen.interruption", "slurmgen.contract", "slurmgen.exit_codes", "slurmgen.run_history")
    found = [
        f"{name} -> {target}"
        for name, targets in graph().items()
        if within(name, "slurmgen.interruption")
        for target in sorted(targets)
        if within(target, "slurmgen") and not any(within(target, ok) for ok in allowed)
    ]
    assert found == []
