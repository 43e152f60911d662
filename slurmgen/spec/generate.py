"""Write spec/model_fields.py, the frozen dataclasses of the job spec, from the field table (spec/fields.py).

The table is the one place a field is declared: validation, `slurmgen schema`, the loader's builder
(Obj.build in spec/types.py) and, through this file, the typed model all come from it. The dataclasses are
written out, not made at import, so that mypy --strict and editors see every field's type.

    python -m slurmgen.spec.generate          # rewrite slurmgen/spec/model_fields.py
    python -m slurmgen.spec.generate --check  # exit 1 when the file is not what the table gives

tests/spec/test_model_fields.py fails when the written file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from slurmgen.spec.fields import SPEC
from slurmgen.spec.types import AnyOf, Obj, Type

TARGET = Path(__file__).with_name("model_fields.py")

HEADER = '''\
"""Generated from spec/fields.py by `python -m slurmgen.spec.generate`: do not edit.

The fields of the resolved job spec, one frozen dataclass per table. Derived fields and methods are hand-written
in spec/model.py (JobSpec extends JobFields).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmgen.spec.sweep_points import SweepSpec
'''


def tables(obj: Obj) -> list[Obj]:
    """Every table under ``obj`` (nested first, in table order), then ``obj`` itself."""
    out: list[Obj] = []
    for field in obj.fields.values():
        out += _nested(field.type)
    return [*out, obj]


def _nested(kind: Type) -> list[Obj]:
    if isinstance(kind, Obj):
        return tables(kind)
    if isinstance(kind, AnyOf):
        return [table for _, option in kind.options for table in _nested(option)]
    return []


def dataclass_text(obj: Obj) -> str:
    lines = ["", "", "@dataclass(frozen=True)", f"class {obj.model}:"]
    lines += [f"    {name}: {field.model_type()}" for name, field in obj.fields.items() if field.in_model]
    return "\n".join(lines) + "\n"


def model_text() -> str:
    return HEADER + "".join(dataclass_text(obj) for obj in tables(SPEC))


def main(argv: list[str]) -> int:
    text = model_text()
    if "--check" in argv:
        if TARGET.read_text() != text:
            print(f"{TARGET} is stale: run python -m slurmgen.spec.generate", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
