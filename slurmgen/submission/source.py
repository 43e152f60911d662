"""The spec a submission or a render starts from (`SpecSource`), and the one compile step they both take
(`compiled`). Its own module, small: `slurmgen render` needs this and none of a backend's submission."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmgen.script.build import Build
    from slurmgen.spec.profile import ClusterProfile

Warn = Callable[[str], None]


@dataclass(frozen=True)
class SpecSource:
    """A spec to submit: the file it lives in (the run directory keeps a copy), its `--set` overrides and the
    arguments given after `--`, which go after the spec's command (the run directory and the journal keep them)."""

    path: Path
    overrides: tuple[str, ...]
    profile: ClusterProfile | None = None  # a cluster's profile: its defaults go under the spec
    args: tuple[str, ...] = ()


def compiled(source: SpecSource, templates: Path | None, warn: Warn) -> Build:
    """Validate and render a spec through the one compile step (slurmgen.script.build); its warnings (and the
    script doctor's), then its notes, go to ``warn``. `slurmgen render` and every submission take this one path."""
    from slurmgen.script.build import build_file, note_line

    built = build_file(source.path, list(source.overrides), templates, Path.cwd(), source.profile, source.args)
    for problem in built.warnings:
        warn(f"warning: {problem}")
    for note in built.notes:
        warn(note_line(note))
    return built
