"""Job spec loading: YAML -> checked fields -> resolved defaults -> cross-field checks -> JobSpec.

Every problem of a file is reported at once, one line each, naming the file, the field and the fix.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen.errors import Problem, SpecError
from slurmgen.spec.fields import ARGV, SPEC
from slurmgen.spec.model import JobSpec, LoadedSpec
from slurmgen.spec.rules import cross_check, resolve
from slurmgen.spec.sweep import check_uses
from slurmgen.spec.types import BAD, Ctx
from slurmgen.spec.yaml_source import FieldPath, Mark, dotted, load_override, load_yaml

if TYPE_CHECKING:
    from slurmgen.spec.profile import ClusterProfile


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


def load_text(
    text: str,
    source: str,
    overrides: list[str] | None = None,
    profile: ClusterProfile | None = None,
    args: Sequence[str] = (),
) -> LoadedSpec:
    """Validate one spec given as text, over a cluster profile's defaults when given (precedence: profile, spec,
    --set); ``args`` (`slurmgen submit SPEC -- ARGS`) go after the command's own words. Raises SpecError with every
    problem found, a profile's value named by the profile's file and line."""
    loaded, problems = load_yaml(text, source)
    if loaded is None:
        raise SpecError(problems)
    data = loaded.value
    if not isinstance(data, dict):
        raise SpecError([Problem(source, "", "must be a mapping of fields (name: ..., command: ..., time: ...)")])
    marks = dict(loaded.marks)
    lines = dict(loaded.lines)
    from_profile: dict[FieldPath, str] = {}
    if profile is not None:
        from slurmgen.spec.profile import layer_profile  # loaded only for a spec run with a cluster profile

        layered = layer_profile(profile, data)
        data, from_profile = layered.data, layered.from_profile
        marks.update(layered.marks)
        given = data
    else:
        given = None
    parsed, set_problems = parse_overrides(overrides or [])
    override_paths = set()
    for path, value, value_marks in parsed:
        refused = _apply(data, path, value)
        if refused is not None:
            set_problems.append(Problem("--set", dotted(path), refused))
            continue
        override_paths.add(path)
        for rel, mark in value_marks.items():
            key = (*path, *rel)  # mypy takes `marks[(*path, *rel)]` for 3.11's star in a subscript
            marks[key] = mark
    shown: tuple[tuple[str, Any, str], ...] = ()
    if given is not None:
        from slurmgen.spec.profile import origins

        shown = tuple(origins(data, from_profile, source, lines, frozenset(override_paths)))
    ctx = Ctx(
        source=source,
        marks=marks,
        lines=lines,
        override_paths=frozenset(override_paths),
        elsewhere={p: w for p, w in from_profile.items() if p not in lines},
    )
    ctx.problems.extend(problems)
    ctx.problems.extend(set_problems)
    checked = SPEC.check(data, ctx, ())
    given_args = check_args(args, ctx.problems)
    warnings: list[Problem] = []
    if checked is not BAD and not ctx.problems:
        spec_fields = resolve(checked, ctx)
        spec_fields["command"] = [*spec_fields["command"], *given_args]
        if not ctx.problems:
            check_uses(spec_fields, ctx)
        if not ctx.problems:
            warnings = cross_check(spec_fields, ctx)
    if ctx.problems:
        raise SpecError(ctx.problems)
    return LoadedSpec(spec=_build(spec_fields), warnings=tuple(warnings), origins=shown, notes=tuple(ctx.notes))


ARGS_SOURCE = "--"  # names the arguments after `--` in a problem: `--: args[1]: ...`


def check_args(args: Sequence[str], problems: list[Problem]) -> list[str]:
    """The command-line arguments to append to the command, checked as the command's own words are (no control
    character, and `${NAME}` only, never `$(...)`); a problem names the argument by its index."""
    if not args:
        return []
    ctx = Ctx(source=ARGS_SOURCE, marks={}, lines={})
    checked = ARGV.check(list(args), ctx, ("args",))
    problems.extend(ctx.problems)
    return [] if checked is BAD else list(checked)


MAX_SPEC_BYTES = 1 << 20  # a job spec is a page of text; 1 MiB leaves room and keeps a runaway file out


def read_spec_bytes(source: str) -> bytes:
    """The spec file's bytes: a regular file of at most MAX_SPEC_BYTES. A device (a link to /dev/zero), a FIFO
    or a directory is refused before reading: read to its end, it would never end or fill the memory."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever (fifo(7)).
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SpecError([Problem(source, "", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise SpecError([Problem(source, "", f"is {what}; give the path of the spec's YAML file")])
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_SPEC_BYTES and (chunk := os.read(fd, MAX_SPEC_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SpecError([Problem(source, "", f"cannot read: {exc.strerror or exc}")]) from None
    finally:
        os.close(fd)
    if size > MAX_SPEC_BYTES:
        limit = MAX_SPEC_BYTES >> 20
        raise SpecError([Problem(source, "", f"is larger than {limit} MiB; a job spec is a short YAML file")])
    return b"".join(chunks)


def read_spec(path: str | Path) -> bytes:
    """The spec file's bytes, read once (one open): what is validated is what a submission keeps."""
    return read_spec_bytes(str(path))


def load_bytes(
    raw: bytes,
    source: str,
    overrides: Sequence[str] | None = None,
    profile: ClusterProfile | None = None,
    args: Sequence[str] = (),
) -> LoadedSpec:
    """Validate a spec file's bytes (UTF-8; CRLF line ends are fine)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(source, "", f"is not UTF-8 text (byte {exc.start}); save it as UTF-8")]) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n")  # a CRLF file is fine; a lone CR inside a value is caught per field
    return load_text(text, source, list(overrides or []), profile, args)


def load_file(path: str | Path, overrides: list[str] | None = None, args: Sequence[str] = ()) -> LoadedSpec:
    return load_bytes(read_spec(path), str(path), overrides, args=args)


def _build(f: dict[str, Any]) -> JobSpec:
    """The resolved fields as the frozen model, field by field from the table (Obj.build); plus the derived."""
    return JobSpec(**SPEC.model_fields(f), time_seconds=f["time_seconds"])
