"""A small declarative type system for the job spec: one table drives validation and the JSON Schema.

Why not a validation library: we need every problem of a file at once, messages that speak about YAML's traps
in the user's own text (the raw scalar, from slurmgen.spec.yaml_source), and a CLI that starts fast. pydantic reports
all errors but its messages would be rewritten one by one and it adds ~70 ms to every `slurmgen render`;
msgspec is fast but stops at the first error. This module is the part of a library we need, in ~250 lines.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slurmgen import variables
from slurmgen.errors import Problem
from slurmgen.spec.yaml_source import REFUSED, FieldPath, Mark, dotted


class Bad:
    """The result of a failed check; the problem is already recorded."""


BAD = Bad()

_YAML_WORDS = {"bool": "true/false", "null": "empty", "int": "a number", "float": "a number"}


@dataclass
class Ctx:
    """What a check needs besides the value: where it came from and where to put problems."""

    source: str
    marks: Mapping[FieldPath, Mark]
    lines: Mapping[FieldPath, int]
    problems: list[Problem] = field(default_factory=list)
    # what slurmgen chose for the user that they may not expect (a default cut to fit): said, never an error
    notes: list[Problem] = field(default_factory=list)
    override_paths: frozenset[FieldPath] = frozenset()
    # values written in another file (a cluster profile's defaults): field path -> "file:line"
    elsewhere: Mapping[FieldPath, str] = field(default_factory=dict)

    def fail(self, path: FieldPath, message: str) -> Bad:
        self.problems.append(Problem(self.where(path), dotted(path), message))
        return BAD

    def note(self, where: FieldPath, path: FieldPath, message: str) -> None:
        """A note on the field ``path``, located at the field ``where`` (the value that caused it)."""
        self.notes.append(Problem(self.where(where), dotted(path), message))

    def where(self, path: FieldPath) -> str:
        for i in range(len(path), -1, -1):
            if path[:i] in self.override_paths:
                return "--set"
        for i in range(len(path), 0, -1):
            if path[:i] in self.elsewhere:
                return self.elsewhere[path[:i]]
            line = self.lines.get(path[:i])
            if line is not None:
                return f"{self.source}:{line}"
        return self.source

    def raw(self, path: FieldPath) -> Mark | None:
        return self.marks.get(path)

    def typed_text(self, value: Any, path: FieldPath) -> Any:
        """On the command line (`--set key=1:00`) a text field takes the text as typed: nobody quotes there."""
        mark = self.marks.get(path)
        if mark is not None and not isinstance(value, str | list | dict) and self.where(path) == "--set":
            return mark.raw
        return value


def bad_char(text: str) -> str | None:
    """Name the first character that must never reach a script: controls (tab allowed), separators, surrogates,
    and invisible format characters (Cf: bidirectional overrides such as U+202E and zero-width characters such
    as U+200B), which make the script read differently from what it runs (CVE-2021-42574, "Trojan Source")."""
    for ch in text:
        if ch == "\t":
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs", "Zl", "Zp"):
            names = {"\n": "a newline", "\r": "a carriage return (CR)", "\x00": "a NUL byte"}
            return names.get(ch, f"the control character U+{ord(ch):04X}")
        if cat == "Cf":
            return f"the invisible format character U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed').lower()})"
    return None


def directive_problem(text: str) -> str | None:
    """What sbatch's directive parser (src/sbatch/opt.c) would do to this value on an #SBATCH line, if harmful."""
    if "\t" in text:
        return "contains a tab; sbatch splits directive arguments on it"
    if "\\" in text:
        return "contains a backslash; sbatch treats it as an escape even inside quotes, so the value would change"
    lowered = text.lower()
    for word in ("hetjob", "packjob"):
        if word in lowered:
            return f"contains `{word}`, which makes sbatch start a heterogeneous job component; reword it"
    return None


class Type:
    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def model_type(self) -> str:
        """The Python type of the checked value in the built JobSpec, as spec/generate.py writes it."""
        raise NotImplementedError(f"{type(self).__name__} does not say its model type (spec/generate.py)")

    def build(self, value: Any) -> Any:
        """The resolved value as the JobSpec holds it (frozen: tuples, dataclasses)."""
        return value

    def wrong(self, value: Any, ctx: Ctx, path: FieldPath, want: str) -> Bad:
        if value is REFUSED:
            return BAD  # the loader already said why
        mark = ctx.raw(path)
        if value is None:
            return ctx.fail(path, f"is empty; give {want} or remove the line to use the default")
        if mark is not None and not mark.quoted and mark.tag in _YAML_WORDS:
            return ctx.fail(path, f"YAML reads `{mark.raw}` as {_YAML_WORDS[mark.tag]}, expected {want}")
        return ctx.fail(path, f"expected {want}, got {type(value).__name__} {value!r}")


@dataclass
class Int(Type):
    min: int | None = None
    max: int | None = None

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
            return ctx.fail(path, f"write {value.strip()} without quotes: it is a number")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return self.wrong(value, ctx, path, "a whole number")
        mark = ctx.raw(path)
        if mark is not None and not mark.quoted:
            raw = mark.raw.lstrip("+-")
            if ":" in raw:
                return ctx.fail(path, f"YAML reads `{mark.raw}` as base-60 ({value}); write a plain number")
            if raw.startswith(("0x", "0o")) or (len(raw) > 1 and raw.startswith("0") and raw.isdigit()):
                return ctx.fail(path, f"YAML reads `{mark.raw}` as {value} (octal/hex); write it in plain decimal")
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                return ctx.fail(path, f"must be a whole number, not {value}")
            value = int(value)
        if self.min is not None and value < self.min:
            return ctx.fail(path, f"must be at least {self.min}, got {value}")
        if self.max is not None and value > self.max:
            return ctx.fail(path, f"must be at most {self.max}, got {value}")
        return value

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer"}
        if self.min is not None:
            out["minimum"] = self.min
        if self.max is not None:
            out["maximum"] = self.max
        return out

    def model_type(self) -> str:
        return "int"


# Where a value's `${NAME}` is expanded (docs/spec.md, Variables): in each task (a name that differs per task) or
# else in the batch shell; in the batch shell only (the value is one for the whole job); or nowhere, because the
# value is on an #SBATCH line, which sbatch reads as literal text (sbatch(1): "shell-specific syntax including
# variable names will be read as literal text") before any shell runs.
TASK, BATCH, SBATCH_LINE = "task", "batch", "sbatch"


def variable_problem(value: str, where: str) -> str | None:
    """What is wrong with the `${...}` of a value expanded ``where``, with the fix; None when nothing is."""
    if where == SBATCH_LINE:
        if "${" not in value:
            return None
        return (
            f"{value!r}: sbatch reads #SBATCH lines as literal text and opens the job's log before any shell runs, "
            "so ${NAME} is not expanded here (it would make a directory named after the text); write the path itself"
        )
    try:
        parts = variables.split(value)
    except variables.VariableError as exc:
        return str(exc)
    if where == BATCH:
        for var in variables.variables(parts):
            if var.per_task:
                return (
                    f"{value!r}: ${{{var.name}}} differs per task, but this value is one for the whole job (the batch "
                    "shell expands it, where the variable is not set); use it in command or env instead"
                )
    return None


def as_path(value: str) -> str:
    """A value with each `${NAME}` as `/v`, for a pattern that wants a path where a variable may stand."""
    try:
        parts = variables.split(value)
    except variables.VariableError:
        return value
    return "".join("/v" if isinstance(p, variables.Variable) else p for p in parts)


@dataclass
class Str(Type):
    pattern: str | None = None  # full-match regex
    hint: str = ""  # what the pattern means, for the message
    max_len: int = 4096
    numbers_ok: bool = False  # accept an unquoted number as the text the user wrote (env values, mem)
    directive: bool = False  # the value lands on an #SBATCH line: sbatch's own parsing rules apply
    expands: str = ""  # `${NAME}` in the value (slurmgen/variables.py): TASK, BATCH, SBATCH_LINE, "" (plain data)

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        value = ctx.typed_text(value, path)
        mark = ctx.raw(path)
        if self.numbers_ok and isinstance(value, int | float) and not isinstance(value, bool):
            value = mark.raw if mark is not None else str(value)
        if not isinstance(value, str):
            if isinstance(value, bool) and mark is not None:
                return ctx.fail(
                    path,
                    f'YAML reads `{mark.raw}` as {str(value).lower()}; quote it if you mean the text: "{mark.raw}"',
                )
            return self.wrong(value, ctx, path, "text")
        problem = bad_char(value)
        if problem is not None:
            return ctx.fail(path, f"contains {problem}, which could inject lines into the script; remove it")
        if self.directive and (problem := directive_problem(value)):
            return ctx.fail(path, problem)
        if len(value) > self.max_len:
            return ctx.fail(path, f"is {len(value)} characters long; the limit is {self.max_len}")
        if self.expands and (problem := variable_problem(value, self.expands)):
            return ctx.fail(path, problem)
        shape = as_path(value) if self.expands in (TASK, BATCH) else value
        if self.pattern is not None and not re.fullmatch(self.pattern, shape):
            return ctx.fail(path, f"{value!r} is not valid: {self.hint or 'must match ' + self.pattern}")
        return value

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": ["string", "number"] if self.numbers_ok else "string", "maxLength": self.max_len}
        if self.pattern is not None:
            out["pattern"] = f"^(?:{self.pattern})$"
            if self.expands in (TASK, BATCH):  # with a ${NAME}, the loader checks the shape itself (as_path)
                out["pattern"] += r"|\$\{"
        return out

    def model_type(self) -> str:
        return "str"


@dataclass
class Enum(Type):
    choices: tuple[str, ...]
    hint: str = ""  # what to do instead, for a value that is not close to a choice

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, str):
            return self.wrong(value, ctx, path, "one of " + ", ".join(self.choices))
        norm = value.lower()
        if norm not in self.choices:
            import difflib  # only on the error path

            close = difflib.get_close_matches(norm, self.choices, n=1)
            tip = f"; did you mean {close[0]!r}?" if close else (f"; {self.hint}" if self.hint else "")
            return ctx.fail(path, f"{value!r} is not one of {', '.join(self.choices)}{tip}")
        return norm

    def schema(self) -> dict[str, Any]:
        return {"enum": list(self.choices)}

    def model_type(self) -> str:
        return "str"


@dataclass
class Bool(Type):
    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, bool):
            return self.wrong(value, ctx, path, "true or false")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def model_type(self) -> str:
        return "bool"


@dataclass
class List(Type):
    item: Type
    min_items: int = 0

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, list):
            return self.wrong(value, ctx, path, "a list")
        if len(value) < self.min_items:
            return ctx.fail(path, f"needs at least {self.min_items} item(s)")
        out = [self.item.check(v, ctx, (*path, i)) for i, v in enumerate(value)]
        return BAD if any(v is BAD for v in out) else out

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.item.schema(), "minItems": self.min_items}

    def model_type(self) -> str:
        return f"tuple[{self.item.model_type()}, ...]"

    def build(self, value: Any) -> Any:
        return tuple(self.item.build(v) for v in value or ())


@dataclass
class Map(Type):
    key: Str
    value: Type

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, dict):
            return self.wrong(value, ctx, path, "a mapping of names to values")
        out: dict[str, Any] = {}
        for k, v in value.items():
            kk = self.key.check(k, ctx, (*path, k))
            vv = self.value.check(v, ctx, (*path, k))
            if kk is not BAD and vv is not BAD:
                out[kk] = vv
        return out if len(out) == len(value) else BAD

    def schema(self) -> dict[str, Any]:
        pattern = self.key.pattern or ".*"
        return {
            "type": "object",
            "patternProperties": {f"^(?:{pattern})$": self.value.schema()},
            "additionalProperties": False,
        }

    def model_type(self) -> str:
        return f"tuple[tuple[str, {self.value.model_type()}], ...]"

    def build(self, value: Any) -> Any:
        return tuple((k, self.value.build(v)) for k, v in (value or {}).items())


@dataclass
class AnyOf(Type):
    """The first alternative whose Python type matches decides; messages come from it."""

    options: tuple[tuple[type | tuple[type, ...], Type], ...]
    want: str

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        for py_type, option in self.options:
            if isinstance(value, py_type):
                return option.check(value, ctx, path)
        return self.wrong(value, ctx, path, self.want)

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [option.schema() for _, option in self.options]}

    def model_option(self) -> Type:
        """The alternative the resolved value always has: the long form (a list, a mapping) that resolution turns
        the short one into (`command: "a b"` -> [a, b], `preemption: false` -> {enabled: false}); among plain
        values, the one that is not true/false."""
        options = [option for _, option in self.options]
        long_forms = [o for o in options if isinstance(o, List | Map | Obj)]
        return long_forms[0] if long_forms else next(o for o in options if not isinstance(o, Bool))

    def model_type(self) -> str:
        chosen = self.model_option()
        flag = not isinstance(chosen, List | Map | Obj) and any(isinstance(o, Bool) for _, o in self.options)
        return chosen.model_type() + (" | None" if flag else "")  # `option: true` in sbatch: a flag, kept as None

    def build(self, value: Any) -> Any:
        return self.model_option().build(value)


@dataclass(frozen=True)
class Field:
    type: Type
    description: str
    required: bool = False
    default: Any = None  # shown in the JSON Schema; resolution lives in spec/rules.py
    resolved: bool = False  # no default here, but spec/rules.py always gives it a value (else: None when left out)
    in_model: bool = True  # False: checked, not kept in JobSpec (version)

    def model_type(self) -> str:
        """The annotation of this field in the generated model (spec/model_fields.py)."""
        annotation = self.type.model_type()
        collection = annotation.startswith("tuple[")  # left out: empty, never None
        always = self.required or self.default is not None or self.resolved or collection
        return annotation if always else f"{annotation} | None"


@dataclass
class Obj(Type):
    fields: dict[str, Field]
    model: str = ""  # the name of its frozen dataclass in spec/model_fields.py

    def model_type(self) -> str:
        return self.model

    def model_fields(self, value: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments of the model's dataclass: every kept field, built from the resolved value (a field
        left out and not resolved: its default)."""
        kept = self.fields.items()
        return {key: field.type.build(value.get(key, field.default)) for key, field in kept if field.in_model}

    def build(self, value: Any) -> Any:
        if value is None:
            return None
        from slurmgen.spec import model_fields  # generated from the tables that use this module: imported late

        return getattr(model_fields, self.model)(**self.model_fields(value))

    def check(self, value: Any, ctx: Ctx, path: FieldPath) -> Any:
        if not isinstance(value, dict):
            return self.wrong(value, ctx, path, "a mapping")
        out: dict[str, Any] = {}
        ok = True
        for key, item in value.items():
            spec = self.fields.get(key)
            if spec is None:
                import difflib  # only on the error path

                close = difflib.get_close_matches(key, list(self.fields), n=1, cutoff=0.6)
                tip = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(self.fields)
                ctx.fail((*path, key), f"unknown key; {tip}")
                ok = False
                continue
            checked = spec.type.check(item, ctx, (*path, key))
            ok = ok and checked is not BAD
            out[key] = checked
        for key, spec in self.fields.items():
            if spec.required and key not in value:
                ctx.fail((*path, key), f"is required: {spec.description}")
                ok = False
        return out if ok else BAD

    def schema(self) -> dict[str, Any]:
        props = {}
        for key, spec in self.fields.items():
            prop = spec.type.schema()
            prop["description"] = spec.description
            if spec.default is not None:
                prop["default"] = spec.default
            props[key] = prop
        required = [k for k, f in self.fields.items() if f.required]
        out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        return out
