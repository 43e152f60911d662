"""What the cluster has before a submission, in one read-only round trip: which snapshots its store holds, which of
a snapshot's files it lacks (for `submit --dry-run`: what would be sent), and the version of the job's Python on the
login node (slurmgen.python_check). The remote script writes nothing; reading its answer is pure (`read_survey`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from slurmgen.backends.slurm_ssh.snapshot import Snapshot
from slurmgen.python_check import PROBE, PythonCheck, judge, parse_version
from slurmgen.remote.transport import Transport

SECTION = "@@slurmgen-survey "


@dataclass(frozen=True)
class Survey:
    stored: frozenset[str]  # digests of the snapshots the store holds
    missing: frozenset[str]  # content digests of the asked snapshot's files the store lacks
    python: PythonCheck | None  # None: not asked


def survey_script(workdir: str, snaps: Sequence[Snapshot], python: str | None, objects: bool) -> str:
    """The remote script; with ``objects``, stdin holds one content digest per line to look up. Pure."""
    w = shlex.quote(workdir)
    names = " ".join(shlex.quote(s.digest) for s in snaps)
    lines = [
        f"echo '{SECTION}stored'",
        f'for h in {names}; do [ -d {w}/snapshots/"$h" ] && echo "$h"; done',
        f"echo '{SECTION}missing'",
    ]
    if objects:
        lines.append(f'while read -r d; do [ -f {w}/objects/"$d" ] || echo "$d"; done')
    if python is not None:
        lines += [
            f"echo '{SECTION}python'",
            f"o=$(cd / && {shlex.quote(python)} -c {shlex.quote(PROBE)} 2>&1); echo $?; printf '%s\\n' \"$o\"",
        ]
    lines.append("true")
    return "\n".join(lines) + "\n"


def read_survey(text: str, python: str | None) -> Survey:
    """The survey from the script's output. Pure."""
    parts: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith(SECTION):
            name = line[len(SECTION) :]
            parts[name] = []
        elif name:
            parts[name].append(line)
    check = None
    if python is not None:
        said = parts.get("python", [])
        if not said:
            check = judge(python, None, "the login node did not answer")
        elif said[0].strip() != "0":
            check = judge(python, None, "\n".join(said[1:]) or f"exit {said[0].strip()}")
        else:
            check = judge(python, parse_version("\n".join(said[1:])))
    return Survey(frozenset(parts.get("stored", [])) - {""}, frozenset(parts.get("missing", [])) - {""}, check)


def survey(
    transport: Transport, workdir: str, snaps: Sequence[Snapshot], python: str | None, objects_of: Snapshot | None
) -> Survey:
    """Ask the cluster, once: the snapshots stored, the files of ``objects_of`` it lacks, ``python``'s version."""
    wanted = b""
    if objects_of is not None:
        wanted = "".join(f"{d}\n" for d in sorted({f.digest for f in objects_of.files})).encode()
    got = transport.run(survey_script(workdir, snaps, python, objects_of is not None), wanted)
    return read_survey(got.stdout.decode(errors="replace"), python)
