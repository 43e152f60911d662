"""slurmgen's import statements read from the source (function-level and TYPE_CHECKING ones included): the
arrows between modules, for the layering and import-cost tests of tests/test_layers.py and the packages' own."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from recorded import REPO

PACKAGE = REPO / "slurmgen"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache  # the tree does not change during a test run
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def run_at_import(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run when the module is imported: the body, into if/try, past `if TYPE_CHECKING:`."""
    found: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and "TYPE_CHECKING" not in ast.unparse(stmt.test):
            found += run_at_import(stmt.body) + run_at_import(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            found += run_at_import(stmt.body + stmt.orelse + stmt.finalbody)
            found += [s for handler in stmt.handlers for s in run_at_import(handler.body)]
        elif not isinstance(stmt, ast.If):
            found.append(stmt)
    return found


def run_ever(tree: ast.AST) -> list[ast.AST]:
    """Every node that may run, in functions too; not what only the type checker reads (`if TYPE_CHECKING:`)."""
    found: list[ast.AST] = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue
        found += [child, *run_ever(child)]
    return found


def imports_of(path: Path, known: dict[str, Path], mode: str = "all") -> set[str]:
    """Every module `path` imports: `from a import b` names a.b where b is a module, else a. `mode`: "all"
    (every import statement), "run" (those that may run: not for the type checker), "import" (those that run
    when the module is imported: not in functions either)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST]
    if mode == "import":
        nodes = list(run_at_import(tree.body))
    elif mode == "run":
        nodes = run_ever(tree)
    else:
        nodes = list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
            found.update(n for n in names if n in known)
            if not all(n in known for n in names):
                found.add(node.module)
    return found


@functools.cache
def graph(mode: str = "all") -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, known, mode) for name, path in known.items()}


def closure(
    start: list[str],
    arrows: dict[str, set[str]],
    importing: str | None = None,
    at_import: dict[str, set[str]] | None = None,
) -> set[str]:
    """Every module reached from `start`, following slurmgen's own modules and the parent packages that importing
    them runs. A package's arrows are what it does at import: its own functions' imports (PEP 562 __getattr__)
    run only for a name taken from it, which `from package import module` is not.

    ``importing``: the module being imported, whose parent packages are not followed on their own: Python
    imports a module's packages before the module itself (the import system, "Regular packages"), so by the time
    its imports run they are in sys.modules already, initialised or under way, and a submodule it imports does
    not run them again. A package that imports its own submodule, or a submodule that imports its siblings, is
    no circle. An import that names such a package (`from package import name`) is still followed.
    ``at_import``: the packages' arrows at import, graph("import") unless given."""
    known = modules()
    at_import = graph("import") if at_import is None else at_import
    parts_of = [] if importing is None else importing.split(".")
    running = {".".join(parts_of[:i]) for i in range(1, len(parts_of) + 1)}
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        parents = [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [p for p in parents if p in arrows and p not in running]
        package = name in known and known[name].stem == "__init__"
        todo += sorted((at_import if package else arrows).get(name, ()))
    return seen


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def loaded_by(code: str) -> list[str]:
    """The modules a fresh interpreter loads for `code`, beyond those it loads for nothing."""
    import json
    import subprocess
    import sys

    probe = f"import sys; b = set(sys.modules); {code}; print(__import__('json').dumps(sorted(set(sys.modules) - b)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


def third_party(names: set[str] | list[str]) -> list[str]:
    """Those of `names` that are neither the standard library nor slurmgen."""
    import sys

    return sorted(n for n in names if n.split(".")[0] not in sys.stdlib_module_names | {"slurmgen"})
