"""One package per process, and imports point down only (docs/development.md, "Where things live"):

    slurmgen.runtime  (the user's program)   may use slurmgen.task and the shared modules
    slurmgen.batch    (the batch shell)       may use the shared modules and the checkpoint file names
    slurmgen.task     (each task)             may use the shared modules only
    shared: slurmgen/*.py, slurmgen/slurm/    use none of the three

and the layers of the whole tree, top to bottom: slurmgen.cli (and `python -m slurmgen`); slurmgen.api;
slurmgen.backends; slurmgen.doctor, slurmgen.queries and slurmgen.local; slurmgen.submission; slurmgen.script,
slurmgen.spec and slurmgen.slurm; the shared modules (slurmgen/*.py), of which the interruption policy
(slurmgen/interruption*.py) uses only the contract, the errors, the run history and the signal names.
No module reaches itself again through these arrows.

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
    assert "slurmgen.runtime.checkpoint.layout" in arrows["slurmgen.batch.resume_state"]  # inside a function
    assert "slurmgen.batch.task_failure" in arrows["slurmgen.batch.restart"]  # `from slurmgen.batch import ...`
    assert "slurmgen.batch.commands" in arrows["slurmgen.runtime.batch.__main__"]  # the legacy forwarder


def test_no_circle_at_import() -> None:
    """No module reaches itself again through the imports that run when it is imported. A package that imports its
    own submodules is no circle (its submodules find it in sys.modules, under way: `closure`); one whose submodule
    takes a name from it at import is."""
    arrows = graph("import")
    circles = [name for name in arrows if name in closure(sorted(arrows[name]), arrows, importing=name)]
    assert circles == []


def test_a_circle_through_a_package_is_seen() -> None:
    """The circle test is not blind to packages: a package's submodule that takes a name from the package at
    import reaches the package again; the package importing its own submodules alone does not."""
    arrows = {name: set(targets) for name, targets in graph("import").items()}
    package, sub = "slurmgen.interruption", "slurmgen.interruption.ending"
    arrows[package] = arrows[package] | {sub}  # `from slurmgen.interruption.ending import decide_end` at its top
    assert package not in closure(sorted(arrows[package]), arrows, importing=package, at_import=arrows)
    arrows[sub] = arrows[sub] | {package}  # and `from slurmgen.interruption import decide` at the top of ending.py
    assert package in closure(sorted(arrows[package]), arrows, importing=package, at_import=arrows)


def reached(start: str, arrows: dict[str, set[str]]) -> set[str]:
    """Every module of slurmgen's that `start`'s imports lead to, following each import statement."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in arrows.get(todo.pop(), ()):
            if target in arrows and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_no_circle_at_all() -> None:
    """The house's rule of 0 circles counts every import: one inside a function or for the type checker only
    points back as much as one at the top (the two modules are one piece, or a shared piece belongs below both)."""
    arrows = graph()
    assert [name for name in arrows if name in reached(name, arrows)] == []


# Where a module stands: its subpackage under slurmgen, else (a module directly in slurmgen/) the shared modules
# ("leaf"), the interruption policy ("policy"), the command line's entry (`__main__`) or the package itself.
LOW = {"slurm", "leaf", "policy"}
MAY_IMPORT = {
    "__main__": {"cli"},
    "cli": {"api", "backends", "doctor", "goodput", "local", "queries", "remote", "script", "spec", "submission", *LOW},
    "slurmgen": {"api", *LOW},  # the package's lazy names (slurmgen.Job, ...)
    "api": {"backends", "goodput", "queries", "script", "spec", "submission", *LOW},
    # one backend per kind of job, and the registry the CLI and the API ask
    "backends": {"goodput", "local", "queries", "remote", "script", "spec", "submission", *LOW},
    "doctor": {"queries", "script", "spec", "submission", *LOW},  # slurmgen doctor, the site command
    "queries": {"goodput", "script", "spec", "submission", *LOW},  # the answers more than one kind gives alike
    "submission": {"script", "spec", *LOW},  # what every kind shares to submit: plan, journal, token recovery
    "goodput": LOW,  # pure numbers and pictures of a run history (slurmgen/goodput/)
    "local": {"queries", "script", "spec", "submission", *LOW},
    "script": {"spec", *LOW},
    "spec": LOW,
    "slurm": LOW,
    "remote": LOW,  # the transport: standard library, errors
    "leaf": LOW,
    "policy": {"policy", "leaf"},  # and of the shared modules only POLICY_MAY_IMPORT
    "runtime": {"task", *LOW},
    "batch": LOW,
    "task": LOW,
    "integrations": {"runtime", *LOW},
}
POLICY_MAY_IMPORT = {
    "slurmgen.contract",
    "slurmgen.errors",
    "slurmgen.exit_codes",
    "slurmgen.run_history",
    "slurmgen.signal_names",
}
# Known arrows up, each to be removed with the change that removes it (the test fails once one is gone).
KNOWN_UP: set[str] = set()


def place(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1:
        return "slurmgen"
    if parts[1] == "interruption":
        return "policy"
    if parts[1] == "job_context":  # a package of shared modules: what every process reads of its job, once
        return "leaf"
    if modules()[name].parent != PACKAGE:
        return parts[1]
    if parts[1] == "__main__":
        return "__main__"
    return "policy" if parts[1].startswith("interruption") else "leaf"


def arrow_points_down(name: str, target: str) -> bool:
    here, there = place(name), place(target)
    if target == "slurmgen" or (here == there and here != "policy"):  # every import runs the package anyway
        return True
    if here == "batch" and target in FORBIDDEN[BATCH][1]:  # the checkpoint layout, as above
        return True
    if any(within(name, legacy) for legacy in LEGACY):
        return True
    if here == "policy" and there == "leaf":
        return target in POLICY_MAY_IMPORT
    return there in MAY_IMPORT.get(here, set())  # an unplaced package: test_the_layers_see_what_they_check says


def test_every_import_points_down_the_layers() -> None:
    found = {
        f"{name} -> {target}"
        for name, targets in graph().items()
        for target in targets
        if target in modules() and not arrow_points_down(name, target)
    }
    assert sorted(found - KNOWN_UP) == []
    assert sorted(KNOWN_UP - found) == []  # an arrow that is gone leaves the list with it


def test_the_layers_see_what_they_check() -> None:
    """Each place of the table is where it should be, and an arrow of each banned kind is caught."""
    unplaced = {place(name) for name in modules()} - set(MAY_IMPORT)
    assert unplaced == set(), "a new place under slurmgen/: say in MAY_IMPORT what it may import"
    assert {place(name) for name in modules()} == set(MAY_IMPORT)
    assert place("slurmgen.interruption.ending") == "policy" and place("slurmgen.contract") == "leaf"
    assert not arrow_points_down("slurmgen.submission.plan", "slurmgen.cli.app")
    assert not arrow_points_down("slurmgen.spec.model", "slurmgen.submission.plan")
    assert not arrow_points_down("slurmgen.slurm.client", "slurmgen.script.render")
    assert not arrow_points_down("slurmgen.interruption", "slurmgen.job_context")
    assert arrow_points_down("slurmgen.__main__", "slurmgen.cli.app")
    assert not arrow_points_down("slurmgen.api.job", "slurmgen.cli.app")


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
