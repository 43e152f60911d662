"""The field table (spec/fields.py) and the model (spec/model.py) name the same fields, and the loader builds the
model from the model's own declaration: a field added to both arrives in JobSpec with no third list to edit."""

from __future__ import annotations

import dataclasses

import pytest

from slurmgen.spec import fields
from slurmgen.spec.load import load_text
from slurmgen.spec.model import ContainerSpec, DistributedSpec, JobSpec, PreemptionSpec
from slurmgen.spec.types import Obj

# What the model has that the file does not (resolved from other fields), and what the file has that is not kept.
DERIVED = {"time_seconds"}
NOT_KEPT = {"version"}


def names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("table", "model", "derived", "not_kept"),
    [
        (fields.SPEC, JobSpec, DERIVED, NOT_KEPT),
        (fields.DISTRIBUTED, DistributedSpec, set(), set()),
        (fields.PREEMPTION, PreemptionSpec, set(), set()),
        (fields.CONTAINER, ContainerSpec, set(), set()),
    ],
)
def test_table_and_model_name_the_same_fields(table: Obj, model: type, derived: set[str], not_kept: set[str]) -> None:
    assert set(table.fields) - not_kept == names(model) - derived


def test_every_kind_of_value_arrives_in_the_model() -> None:
    text = """\
name: kinds
command: [python3, train.py]
time: "00:10:00"
env: {B: "2", A: "1"}
setup: "module load cuda"
container: {image: "nvcr.io#nvidia/pytorch:24.05-py3"}
sbatch: {exclusive: true, mail-type: END}
preemption: false
"""
    spec = load_text(text, "kinds.yaml").spec
    assert spec.command == ("python3", "train.py")
    assert spec.env == (("B", "2"), ("A", "1"))  # the file's order
    assert spec.setup == ("module load cuda",)
    assert spec.container == ContainerSpec(
        "pyxis", None, "nvcr.io#nvidia/pytorch:24.05-py3", None, (), (), None, None, None, None, None, None, None
    )
    assert spec.sbatch == (("exclusive", None), ("mail-type", "END"))
    assert spec.preemption.enabled is False and isinstance(spec.distributed, DistributedSpec)
    assert spec.cpus_per_task is None and spec.time_seconds == 600
    assert load_text(text.replace("container: {image", "# {image"), "k.yaml").spec.container is None


def test_the_generated_model_is_what_the_table_gives() -> None:
    """spec/model_fields.py is written from the table: a field added to the table and not generated fails here
    (run python -m slurmgen.spec.generate)."""
    from slurmgen.spec import generate

    assert generate.TARGET.read_text() == generate.model_text()
    assert generate.main(["--check"]) == 0


def test_a_field_added_to_the_table_reaches_the_generated_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmgen.spec import generate
    from slurmgen.spec.types import Field, Int, Str

    monkeypatch.setitem(fields.TRACKERS.fields, "mlflow", Field(Str(), "a new text field, no default"))
    monkeypatch.setitem(fields.DISTRIBUTED.fields, "retries", Field(Int(), "a new number", default=3))
    text = generate.model_text()
    assert "    mlflow: str | None\n" in text and "    retries: int\n" in text
    assert generate.TARGET.read_text() != text
    assert generate.main(["--check"]) == 1


def test_a_nested_field_added_to_the_table_alone_arrives_in_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """No builder or resolver to edit: the table and the generated dataclass are enough."""
    from slurmgen.spec import generate, model_fields
    from slurmgen.spec.types import Field, Str

    monkeypatch.setitem(fields.TRACKERS.fields, "project", Field(Str(), "a tracker project", default="main"))
    namespace: dict[str, object] = {}
    exec(compile(generate.model_text(), "model_fields.py", "exec"), namespace)  # noqa: S102 - our own generated text
    monkeypatch.setattr(model_fields, "TrackersSpec", namespace["TrackersSpec"])
    base = 'name: t\ncommand: [python3, t.py]\ntime: "10"\n'
    given = load_text(base + "trackers: {wandb: false, project: vision}\n", "t.yaml").spec.trackers
    assert dataclasses.asdict(given) == {"wandb": False, "project": "vision"}
    assert dataclasses.asdict(load_text(base, "t.yaml").spec.trackers) == {"wandb": True, "project": "main"}
