"""`import slurmgen.runtime` costs nothing: checked in a fresh interpreter, not in pytest's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .runtime_helpers import ROOT

FORBIDDEN = (
    "torch",
    "typer",
    "click",
    "jinja2",
    "yaml",
    "pydantic",
    "jsonschema",
    "ifcfg",
    "numpy",
    "typing",
)


def loaded_by(code: str) -> list[str]:
    probe = (
        f"import sys; before = set(sys.modules); {code}; new = sorted(set(sys.modules) - before); "
        "import json; print(json.dumps(new))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


def test_import_loads_only_the_package() -> None:
    assert loaded_by("import slurmgen.runtime") == ["slurmgen", "slurmgen.runtime"]


@pytest.mark.parametrize(
    "name",
    [
        "expand_hostlist",
        "get_distrib_size",
        "init_distributed",
        "barrier",
        "build_mesh",
        "wrap_ddp",
        "seed_everything",
        "is_rank_zero",
    ],
)
def test_public_names_do_not_load_heavy_dependencies(name: str) -> None:
    new = loaded_by(f"from slurmgen.runtime import {name}")
    assert not [m for m in new if m.split(".")[0] in FORBIDDEN[:-1]]


def test_entry_point_does_not_load_torch() -> None:
    new = loaded_by("import slurmgen.task.launch, slurmgen.task.prepare")
    assert not [m for m in new if m.split(".")[0] in FORBIDDEN[:-1]]


def test_every_exported_name_resolves() -> None:
    import slurmgen.runtime as runtime

    for name in runtime.__all__:
        assert getattr(runtime, name) is not None
    assert set(runtime.__all__) <= set(dir(runtime))
    with pytest.raises(AttributeError):
        runtime.no_such_name  # noqa: B018
    # `barrier` is the function, not a submodule of the same name shadowing it.
    assert callable(runtime.barrier)


def find_python(version: str) -> str | None:
    """A working interpreter of ``version``: on PATH, else in a pyenv tree (whose shims may be inactive)."""
    import glob
    import shutil

    root = os.path.expanduser(os.environ.get("PYENV_ROOT", "~/.pyenv"))
    candidates = [
        shutil.which(f"python{version}"),
        *sorted(glob.glob(f"{root}/versions/{version}.*/bin/python")),
    ]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=30).returncode == 0:
            return candidate
    return None


def test_an_older_python_is_refused_in_one_line() -> None:
    """A program may run on an older Python than the runtime's floor (3.10, requires-python): it gets one line
    that says so, never a traceback from deep inside; the task supervisor's floor (3.9) is checked the same way
    (tests/test_python_floor.py)."""
    found = find_python("3.9")
    if found is None:
        pytest.skip("no working python3.9 here")
    imported = subprocess.run([found, "-B", "-c", "import slurmgen.runtime"], cwd=ROOT, capture_output=True, text=True)
    assert imported.returncode == 1 and imported.stderr.strip().splitlines()[-1].startswith(
        "ImportError: slurmgen's runtime needs Python 3.10 or newer in the task; this is 3.9."
    )
