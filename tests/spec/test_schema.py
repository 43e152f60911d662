"""`slurmgen schema` prints a JSON Schema that editors can use: it accepts every example and rejects typos."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from slurmgen.cli.app import main

JOBS = sorted((Path(__file__).parent.parent.parent / "jobs").glob("*.yaml"))


@pytest.fixture(scope="module")
def schema() -> dict[str, object]:
    from slurmgen.spec.fields import json_schema

    return json_schema()


def test_cli_prints_valid_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(printed)
    assert set(printed["required"]) == {"name", "command"}  # time may be left out: the partition default


@pytest.mark.parametrize("job", JOBS, ids=lambda p: p.stem)
def test_examples_conform(job: Path, schema: dict[str, object]) -> None:
    jsonschema.validate(yaml.safe_load(job.read_text()), schema)


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "x", "command": ["a"], "time": "10", "nodse": 2},
        {"name": "x y", "command": ["a"], "time": "10"},
        {"name": "x", "command": ["a"], "time": "10", "launcher": "mpirun"},
        {"name": "x", "command": ["a"], "time": "10", "distributed": {"port": 80}},
        {"name": "x", "command": [], "time": "10"},
    ],
)
def test_schema_rejects_what_validation_rejects(doc: dict[str, object], schema: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
