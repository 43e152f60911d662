"""The one compile step: a spec file's bytes, the `--set` overrides and the templates give a Build: the spec, the
script, every warning and note, and the exact bytes that were validated.

`render`, `validate`, `submit`, `run` and `doctor` all go through here, so they read the file once and say the same
things. `check` stops before rendering (`validate` and `doctor` need no script, and must not pay for Jinja);
`build` renders a checked spec and adds the script doctor's warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen.errors import Problem, SpecError
from slurmgen.spec.load import load_bytes, read_spec
from slurmgen.spec.model import JobSpec
from slurmgen.spec.where import missing_script, untrusted_checkpoint

if TYPE_CHECKING:
    from slurmgen.spec.profile import ClusterProfile


@dataclass(frozen=True)
class Checked:
    source: str  # the spec file as given (names it in every problem)
    text: bytes  # the exact bytes validated; a submission keeps these, never a second read of the file
    spec: JobSpec
    warnings: tuple[Problem, ...]  # the spec's own, then those about the files where the job runs
    origins: tuple[tuple[str, Any, str], ...] = ()  # with a cluster profile: (field, value, where it came from)
    notes: tuple[Problem, ...] = ()  # what slurmgen chose that the user may not expect: said, never an error


@dataclass(frozen=True)
class Build:
    source: str
    text: bytes
    spec: JobSpec
    script: str
    warnings: tuple[Problem, ...]  # Checked.warnings, then the script doctor's
    origins: tuple[tuple[str, Any, str], ...] = ()  # as Checked.origins
    notes: tuple[Problem, ...] = ()  # as Checked.notes


def check(
    raw: bytes,
    source: str,
    overrides: Sequence[str],
    submit_dir: Path,
    profile: ClusterProfile | None = None,
    args: Sequence[str] = (),
) -> Checked:
    """Validate the bytes with the overrides and the arguments after the command's (`-- ARGS`); ``submit_dir`` is
    where the job is submitted from (its files are looked at: the command's script must be there). Raises SpecError
    with every problem."""
    loaded = load_bytes(raw, source, overrides, profile, args)
    refused = untrusted_checkpoint(loaded.spec, source, submit_dir)
    if refused is not None:
        raise SpecError([refused])
    missing = [missing_script(loaded.spec, source, submit_dir)]
    warnings = (*loaded.warnings, *(problem for problem in missing if problem is not None))
    return Checked(source, raw, loaded.spec, warnings, loaded.origins, loaded.notes)


def build(checked: Checked, templates: str | Path | None) -> Build:
    """Render a checked spec (``templates``: the user's template directory, searched first)."""
    from slurmgen.script.checks import check_script
    from slurmgen.script.render import render

    script = render(checked.spec, templates)
    warnings = (*checked.warnings, *check_script(checked.spec, script))
    return Build(checked.source, checked.text, checked.spec, script, warnings, checked.origins, checked.notes)


def note_line(note: Problem) -> str:
    """How every command says a note of the spec on stderr, once, after its warnings; `validate --strict` does not
    count it (a note is a choice explained, not a likely mistake)."""
    return f"note: {note}"


def check_file(
    path: str | Path,
    overrides: Sequence[str],
    submit_dir: Path,
    profile: ClusterProfile | None = None,
    args: Sequence[str] = (),
) -> Checked:
    """Read the spec file once and check it (over a cluster profile's defaults when given)."""
    return check(read_spec(path), str(path), overrides, submit_dir, profile, args)


def build_file(
    path: str | Path,
    overrides: Sequence[str],
    templates: str | Path | None,
    submit_dir: Path,
    profile: ClusterProfile | None = None,
    args: Sequence[str] = (),
) -> Build:
    """Read the spec file once, check it and render it."""
    return build(check_file(path, overrides, submit_dir, profile, args), templates)
