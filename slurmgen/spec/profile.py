"""Cluster profiles: where a cluster is (`host`), where slurmgen keeps its files there (`workdir`) and the site's
defaults for every spec run there (`defaults`, a partial job spec).

Two files hold profiles, each a YAML mapping from a cluster's name to its profile: the user's own
`$XDG_CONFIG_HOME/slurmgen/clusters.yaml` (default `~/.config/slurmgen/clusters.yaml`) and a `clusters.yaml`
checked in beside the specs. A name in the user's file wins as a whole (the user's host alias and workdir are
personal; a team's file names the shared ones).

Precedence, lowest first: the profile's `defaults`, then the spec, then `--set`. Mappings (`env`, `sbatch`,
`container`, ...) merge key by key; any other value (a list such as `setup`, a number, a text) is replaced as a
whole by the layer above. `layer_profile` does that merge and keeps where each value came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmgen.errors import Problem, SpecError
from slurmgen.spec.yaml_source import FieldPath, Mark, dotted, load_yaml
from slurmgen.ssh_destination import RULE, is_destination

PROFILE_FILE = "clusters.yaml"
PROFILE_KEYS = ("host", "workdir", "defaults", "control_persist", "snapshot_limit_mb", "shared_workdir")
DEFAULT_CONTROL_PERSIST = 600  # seconds the shared ssh connection stays open after its last use
DEFAULT_SNAPSHOT_LIMIT_MB = 100


@dataclass(frozen=True)
class ClusterProfile:
    name: str
    source: str  # the file it was read from
    host: str | None  # an ssh destination (alias or user@host); None: this machine
    workdir: str
    defaults: Mapping[str, Any]
    control_persist: int = DEFAULT_CONTROL_PERSIST
    snapshot_limit_mb: int = DEFAULT_SNAPSHOT_LIMIT_MB
    # the workdir is a team's: each user's files go in <workdir>/<user name>, a directory of their own
    shared_workdir: bool = False
    # where each defaults value was written: field path -> line in `source`
    lines: Mapping[FieldPath, int] = field(default_factory=dict)
    marks: Mapping[FieldPath, Mark] = field(default_factory=dict)


def user_profile_file(environ: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/slurmgen/clusters.yaml`, XDG's default `~/.config` when unset or empty (XDG Base Directory
    specification)."""
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".config")
    return Path(base) / "slurmgen" / PROFILE_FILE


def _problem(source: str, lines: Mapping[FieldPath, int], path: FieldPath, message: str) -> Problem:
    line = next((lines[path[:i]] for i in range(len(path), 0, -1) if path[:i] in lines), None)
    return Problem(source if line is None else f"{source}:{line}", dotted(path), message)


def parse_profiles(text: str, source: str) -> dict[str, ClusterProfile]:
    """Every profile of one file; SpecError with one line per problem (file:line, field, what to write)."""
    doc, problems = load_yaml(text, source)
    if doc is None:
        raise SpecError(problems)
    if doc.value is None:
        return {}
    if not isinstance(doc.value, dict):
        raise SpecError(
            [Problem(source, "", "must map cluster names to profiles (mycluster: {host: ..., workdir: ...})")]
        )
    profiles: dict[str, ClusterProfile] = {}
    for name, body in doc.value.items():
        where = (str(name),)
        if not isinstance(body, dict):
            problems.append(_problem(source, doc.lines, where, "must be a mapping with host, workdir and defaults"))
            continue
        for key in body:
            if key not in PROFILE_KEYS:
                known = ", ".join(PROFILE_KEYS)
                problems.append(_problem(source, doc.lines, (*where, key), f"unknown key; known keys: {known}"))
        host, workdir, defaults = body.get("host"), body.get("workdir"), body.get("defaults", {})
        if host is not None and not is_destination(host):
            # ssh would read "-oProxyCommand=..." as an option, and advice naming it would run it when pasted
            problems.append(_problem(source, doc.lines, (*where, "host"), f"{RULE}; got {host!r}"))
        if not isinstance(workdir, str) or not workdir:
            problems.append(_problem(source, doc.lines, (*where, "workdir"), "required: a directory on the cluster"))
        elif workdir.startswith("~") and workdir != "~" and not workdir.startswith("~/"):
            problems.append(_problem(source, doc.lines, (*where, "workdir"),
                                     "another user's home (~name) is not read: write ~/... (your home on the "
                                     "cluster) or an absolute path"))  # fmt: skip
        if defaults is None:
            defaults = {}
        if not isinstance(defaults, dict):
            problems.append(_problem(source, doc.lines, (*where, "defaults"), "must be a mapping of spec fields"))
        for key, low in (("control_persist", 0), ("snapshot_limit_mb", 1)):
            value = body.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                problems.append(_problem(source, doc.lines, (*where, key), f"must be a whole number >= {low}"))
        if not isinstance(body.get("shared_workdir", False), bool):
            problems.append(_problem(source, doc.lines, (*where, "shared_workdir"), "must be true or false"))
        if problems:
            continue
        lines = {p[2:]: n for p, n in doc.lines.items() if p[:2] == (*where, "defaults") and len(p) > 2}
        marks = {p[2:]: m for p, m in doc.marks.items() if p[:2] == (*where, "defaults") and len(p) > 2}
        profiles[str(name)] = ClusterProfile(
            name=str(name),
            source=source,
            host=host,
            workdir=str(workdir),
            defaults=defaults,
            control_persist=body.get("control_persist", DEFAULT_CONTROL_PERSIST),
            snapshot_limit_mb=body.get("snapshot_limit_mb", DEFAULT_SNAPSHOT_LIMIT_MB),
            shared_workdir=body.get("shared_workdir", False),
            lines=lines,
            marks=marks,
        )
    if problems:
        raise SpecError(problems)
    return profiles


def profile_files(spec_dir: Path | None, environ: Mapping[str, str]) -> list[Path]:
    """The files searched, first match wins: the user's, then the one checked in beside the spec."""
    files = [user_profile_file(environ)]
    if spec_dir is not None:
        files.append(spec_dir / PROFILE_FILE)
    return files


def find_profile(name: str, spec_dir: Path | None, environ: Mapping[str, str] | None = None) -> ClusterProfile:
    """The profile called ``name``; SpecError naming the files searched when none has it."""
    env = os.environ if environ is None else environ
    searched = profile_files(spec_dir, env)
    for path in searched:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError([Problem(str(path), "", f"cannot read: {exc}")]) from None
        found = parse_profiles(text, str(path))
        if name in found:
            return found[name]
    where = " or ".join(str(p) for p in searched)
    raise SpecError(
        [Problem("--cluster", name, f"no such cluster profile; add `{name}: {{host: ..., workdir: ...}}` to {where}")]
    )


@dataclass(frozen=True)
class Layered:
    """A spec's data over a profile's defaults, and where each profile value came from (`file:line`)."""

    data: dict[str, Any]
    from_profile: dict[FieldPath, str]
    marks: dict[FieldPath, Mark]


def layer_profile(profile: ClusterProfile, spec: dict[str, Any]) -> Layered:
    """The spec's fields over the profile's defaults: mappings merge, other values of the spec replace."""
    from_profile: dict[FieldPath, str] = {}
    marks: dict[FieldPath, Mark] = {}

    def where(path: FieldPath) -> str:
        line = next((profile.lines[path[:i]] for i in range(len(path), 0, -1) if path[:i] in profile.lines), None)
        return profile.source if line is None else f"{profile.source}:{line}"

    def merge(low: Any, high: Any, path: FieldPath) -> Any:
        if high is _ABSENT:
            _claim(low, path)
            return low
        if isinstance(low, dict) and isinstance(high, dict):
            out = {}
            for key in {**low, **high}:
                out[key] = merge(low.get(key, _ABSENT), high.get(key, _ABSENT), (*path, key))
                if out[key] is _ABSENT:
                    del out[key]
            return out
        return high

    def _claim(value: Any, path: FieldPath) -> None:
        if value is _ABSENT:
            return
        from_profile[path] = where(path)
        if path in profile.marks:
            marks[path] = profile.marks[path]
        if isinstance(value, dict):
            for key, child in value.items():
                _claim(child, (*path, key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                _claim(child, (*path, i))

    data = merge(dict(profile.defaults), spec, ())
    return Layered(data=data, from_profile=from_profile, marks=marks)


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()


def origins(
    data: Mapping[str, Any],
    from_profile: Mapping[FieldPath, str],
    spec_source: str,
    spec_lines: Mapping[FieldPath, int],
    overridden: frozenset[FieldPath],
) -> list[tuple[str, Any, str]]:
    """(field, value, where it came from) for every field given: `--set`, the profile's file:line or the spec's."""
    rows: list[tuple[str, Any, str]] = []

    def walk(value: Any, path: FieldPath) -> None:
        if isinstance(value, dict) and value:
            for key, child in value.items():
                walk(child, (*path, key))
            return
        if any(path[:i] in overridden for i in range(len(path), 0, -1)):
            origin = "--set"
        elif path in from_profile:
            origin = f"profile {from_profile[path]}"
        else:
            line = next((spec_lines[path[:i]] for i in range(len(path), 0, -1) if path[:i] in spec_lines), None)
            origin = f"spec {spec_source}" + ("" if line is None else f":{line}")
        rows.append((dotted(path), value, origin))

    walk(dict(data), ())
    return rows
