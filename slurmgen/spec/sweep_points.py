"""A sweep's points and `{name}` placeholders as values: what the model (spec/model_fields.py), the script and
the sweep commands read. The field's checks are spec/sweep.py, above this module: the model's annotation needs
SweepSpec without the spec's type machinery.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

Value = str | int | float | bool
PARAM = r"[A-Za-z_][A-Za-z0-9_]*"


@dataclass(frozen=True)
class SweepSpec:
    params: tuple[str, ...]  # names, in the order of their first appearance
    points: tuple[tuple[Value, ...], ...]  # one tuple of values per point, in params order
    max_parallel: int | None  # at most this many points run at once; None: no limit

    def values(self, index: int) -> dict[str, Value]:
        return dict(zip(self.params, self.points[index], strict=True))

    def params_json(self, index: int) -> str:
        """SLURMGEN_SWEEP_PARAMS of one point: its values as one line of JSON."""
        return json.dumps(self.values(index), separators=(",", ":"), ensure_ascii=False)

    def shown(self, index: int) -> str:
        """`lr=0.001 seed=3`, for tables and dry runs."""
        return " ".join(f"{k}={as_text(v)}" for k, v in self.values(index).items())


def as_text(value: Value) -> str:
    """How a value is written into a command or env value: YAML's spelling of booleans, repr of floats."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


# --- placeholders -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placeholder:
    name: str


_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def split_template(text: str) -> list[str | Placeholder]:
    """`--lr={lr}` -> ["--lr=", Placeholder("lr")]; `{{` and `}}` are literal braces. Raises ValueError."""
    out: list[str | Placeholder] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        if match.start() > pos:
            out.append(text[pos : match.start()])
        token = match[0]
        if token in ("{{", "}}"):
            out.append(token[0])
        elif token in ("{", "}"):
            raise ValueError(f"has a lone `{token}` in {text!r}; write `{token * 2}` for a literal brace")
        elif not re.fullmatch(PARAM, match[1]):
            raise ValueError(f"`{token}` in {text!r} is not a placeholder; write `{{{{`/`}}}}` for literal braces")
        else:
            out.append(Placeholder(match[1]))
        pos = match.end()
    if pos < len(text):
        out.append(text[pos:])
    merged: list[str | Placeholder] = []
    for part in out:  # join adjacent literal pieces
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    return merged


def fill(text: str, values: dict[str, Value]) -> str:
    """The text with each placeholder replaced by its value (a local run; the script does it in bash)."""
    return "".join(p if isinstance(p, str) else as_text(values[p.name]) for p in split_template(text))
