"""Job spec loading: YAML -> checked fields -> resolved defaults -> cross-field checks -> JobSpec.

Every problem of a file is reported at once, one line each, naming the file, the field and the fix.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmgen.errors import Problem, SpecError
from slurmgen.spec.fields import SPEC
from slurmgen.spec.model import JobSpec, LoadedSpec
from slurmgen.spec.rules import cross_check, resolve
from slurmgen.spec.types import BAD, Ctx
from slurmgen.spec.yaml_source import FieldPath, Mark, dotted, load_override, load_yaml


def parse_overrides(items: list[str]) -> tuple[list[tuple[FieldPath, Any, dict[FieldPath, Mark]]], list[Problem]]:
    """`--set distributed.port=9000` -> (path, value, marks). Values read as YAML, with the same trap checks."""
    out: list[tuple[FieldPath, Any, dict[FieldPath, Mark]]] = []
    problems: list[Problem] = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            problems.append(Problem("--set", "", f"{item!r}: write --set path.to.key=value"))
            continue
        parts = tuple(key.strip().split("."))
        if any(not p for p in parts):
            problems.append(Problem("--set", key, "empty part in the field path; write e.g. preemption.lead_time"))
            continue
        value, marks, errs = load_override(text)
        problems.extend(Problem("--set", key, e.message) for e in errs)
        if not errs:
            out.append((parts, value, marks))
    return out, problems


_KIND = {bool: "true/false", int: "a number", float: "a number", str: "text", list: "a list"}


def _apply(data: dict[str, Any], path: FieldPath, value: Any) -> str | None:
    """Put an override's value at ``path``; the reason when the path goes inside a value that is not a mapping."""
    node = data
    for depth, part in enumerate(path[:-1], 1):
        child = node.get(str(part))
        if child is None or child is True:
            child = {}
        elif child is False:  # `preemption: false` then --set preemption.signal=HUP
            child = {"enabled": False}
        elif not isinstance(child, dict):
            kind = _KIND.get(type(child), type(child).__name__)
            inside = dotted(path[:depth])
            shown = "" if isinstance(child, list) else f" ({child!r})"
            return f"the override tries to go inside {inside}, which is {kind}{shown}; write --set {inside}=VALUE"
        node[str(part)] = child
        node = child
    node[str(path[-1])] = value
    return None


def load_text(text: str, source: str, overrides: list[str] | None = None) -> LoadedSpec:
    """Validate one spec given as text. Raises SpecError with every problem found."""
    loaded, problems = load_yaml(text, source)
    if loaded is None:
        raise SpecError(problems)
    data = loaded.value
    if not isinstance(data, dict):
        raise SpecError([Problem(source, "", "must be a mapping of fields (name: ..., command: ..., time: ...)")])
    marks = dict(loaded.marks)
    lines = dict(loaded.lines)
    parsed, set_problems = parse_overrides(overrides or [])
    override_paths = set()
    for path, value, value_marks in parsed:
        refused = _apply(data, path, value)
        if refused is not None:
            set_problems.append(Problem("--set", dotted(path), refused))
            continue
        override_paths.add(path)
        for rel, mark in value_marks.items():
            marks[(*path, *rel)] = mark
    ctx = Ctx(source=source, marks=marks, lines=lines, override_paths=frozenset(override_paths))
    ctx.problems.extend(problems)
    ctx.problems.extend(set_problems)
    checked = SPEC.check(data, ctx, ())
    warnings: list[Problem] = []
    if checked is not BAD and not ctx.problems:
        spec_fields = resolve(checked, ctx)
        if not ctx.problems:
            warnings = cross_check(spec_fields, ctx)
    if ctx.problems:
        raise SpecError(ctx.problems)
    return LoadedSpec(spec=_build(spec_fields), warnings=tuple(warnings))


def read_spec(path: str | Path) -> bytes:
    """The spec file's bytes, read once (one open): what is validated is what a submission keeps."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SpecError([Problem(str(path), "", f"cannot read: {exc.strerror or exc}")]) from None


def load_bytes(raw: bytes, source: str, overrides: Sequence[str] | None = None) -> LoadedSpec:
    """Validate a spec file's bytes (UTF-8; CRLF line ends are fine)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(source, "", f"is not UTF-8 text (byte {exc.start}); save it as UTF-8")]) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n")  # a CRLF file is fine; a lone CR inside a value is caught per field
    return load_text(text, source, list(overrides or []))


def load_file(path: str | Path, overrides: list[str] | None = None) -> LoadedSpec:
    return load_bytes(read_spec(path), str(path), overrides)


def _build(f: dict[str, Any]) -> JobSpec:
    """The model from the resolved fields, read off the model's own declaration (no third list of field names)."""
    spec: JobSpec = _made(JobSpec, f)
    return spec


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _made(cls: Any, values: dict[str, Any]) -> Any:
    """An instance of the frozen dataclass ``cls``: nested specs built the same way; lists and mappings become
    tuples (a mapping: its (key, value) pairs in the file's order); a missing optional value is None, a missing
    sequence empty."""
    hints = _hints(cls)
    return cls(**{f.name: _converted(hints[f.name], values.get(f.name)) for f in dataclasses.fields(cls)})


def _converted(hint: Any, value: Any) -> Any:
    sequence = typing.get_origin(hint) is tuple
    if value is None:
        return () if sequence else None
    nested = next((t for t in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(t)), None)
    if nested is not None:
        return _made(nested, value)
    if sequence:
        return tuple(value.items()) if isinstance(value, dict) else tuple(value)
    return value
