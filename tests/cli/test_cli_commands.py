"""The CLI loads a command's module only when that command runs (slurmgen.cli.app.COMMANDS), and a render loads
only what its spec uses: a spec without a cluster profile, env, container or sweep imports none of their modules,
and a render imports no other command's module. What a cold `slurmgen render` costs in time is the bench's
(bench/render_against.py); this pins what it imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer.main
from import_graph import PACKAGE
from recorded import REPO

from slurmgen.cli.app import COMMANDS, load_command

from .cli_setup import run


def names(module: str) -> list[str]:
    """The commands a module under slurmgen.cli defines, in the order it defines them."""
    import importlib

    commands: typer.Typer = importlib.import_module(f"slurmgen.cli.{module}").commands
    return [
        info.name or typer.main.get_command_name(info.callback.__name__)
        for info in commands.registered_commands
        if info.callback is not None
    ]


def test_the_table_names_every_command_of_every_command_module() -> None:
    modules = sorted(p.stem for p in (PACKAGE / "cli").glob("*_commands.py"))
    assert sorted({loader.__name__ for loader in COMMANDS.values()}) == modules
    for module in modules:
        assert names(module) == [name for name, there in COMMANDS.items() if there.__name__ == module], module


def test_a_loaded_command_is_the_one_its_module_defines(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("render", "report", "run"):
        assert load_command(name).name == name
    assert (load_command("render").short_help or "").startswith("Print the sbatch script")
    monkeypatch.setitem(COMMANDS, "nope", COMMANDS["render"])
    with pytest.raises(LookupError, match="defines no command 'nope'"):
        load_command("nope")


def test_help_lists_every_command_in_the_table_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    listed = [line.split()[0] for line in out.split("Commands:", 1)[1].splitlines() if line.strip()]
    assert code == 0 and listed == list(COMMANDS)


def test_an_unknown_command_names_the_close_ones_of_every_module(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "repor", "x")
    assert code == 2 and "No such command 'repor'. Did you mean 'report'" in err
    code, _, err = run(capsys, "rendr", "x")
    assert code == 2 and "Did you mean 'render'?" in err


# The modules of features jobs/cpu-debug.yaml does not use (a cluster profile, secrets in env, a container, a
# sweep), the policy beyond the hold window, the submission, and every command module but render's.
NOT_FOR_A_PLAIN_RENDER = [
    "slurmgen.spec.profile",
    "slurmgen.spec.secrets",
    "slurmgen.trust",
    "slurmgen.spec.container",
    "slurmgen.script.container_apptainer",
    "slurmgen.script.container_enroot",
    "slurmgen.spec.sweep_points",
    "slurmgen.interruption.running",
    "slurmgen.interruption.states",
    "slurmgen.run_history",
    "slurmgen.api.submitting",
    *(f"slurmgen.cli.{module}" for module in {loader.__name__ for loader in COMMANDS.values()} - {"spec_commands"}),
]

PROBE = """
import contextlib, io, json, sys
from slurmgen.cli.app import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["render", "jobs/cpu-debug.yaml"])
print(json.dumps({"code": code, "script": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def test_a_plain_render_loads_no_module_of_a_feature_it_does_not_use() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=True)  # fmt: skip
    found = json.loads(done.stdout)
    assert found["code"] == 0 and found["script"].startswith("#!")
    assert sorted(set(NOT_FOR_A_PLAIN_RENDER) & set(found["modules"])) == []
    assert "slurmgen.cli.spec_commands" in found["modules"]  # the probe sees what it checks
