"""What the cluster has before a submission, in one read-only round trip: which snapshots its store holds, which of
a snapshot's files it lacks (for `submit --dry-run`: what would be sent), and the version of the job's Python on the
login node (slurmgen.python_check). The remote script writes nothing; reading its answer is pure (`read_survey`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from slurmgen.backends.slurm_ssh.snapshot import COMPLETE, Snapshot
from slurmgen.backends.slurm_ssh.store_trust import SG_OWN, refuse, resolve_line, store_check
from slurmgen.python_check import PROBE, PythonCheck, judge, parse_version
from slurmgen.remote.transport import Transport

SECTION = "@@slurmgen-survey "


@dataclass(frozen=True)
class Survey:
    stored: frozenset[str]  # digests of the snapshots the store holds
    missing: frozenset[str]  # content digests of the asked snapshot's files the store lacks
    python: PythonCheck | None  # None: not asked
    workdir: str = ""  # the profile's workdir as the cluster resolved it (absolute; `~` in the remote home)


def survey_script(
    workdir: str, snaps: Sequence[Snapshot], python: str | None, objects: bool, shared: bool = False
) -> str:
    """The remote script; with ``objects``, stdin holds one content digest per line to look up. Pure. A store
    another user made or can write is refused before anything in it is read (store_trust); a snapshot counts as
    stored only when it is the user's own and complete (its marker is written last, after every hash check)."""
    names = " ".join(shlex.quote(s.digest) for s in snaps)
    lines = [
        SG_OWN + resolve_line(workdir, shared) + store_check(),
        f"echo '{SECTION}workdir'; printf '%s\\n' \"$w\"",
        f"echo '{SECTION}stored'",
        f'for h in {names}; do [ -f "$w/snapshots/$h/{COMPLETE}" ] && sg_own "$w/snapshots/$h" >/dev/null &&'
        ' echo "$h"; done',
        f"echo '{SECTION}missing'",
    ]
    if objects:
        lines.append('while read -r d; do [ -f "$w/objects/$d" ] || echo "$d"; done')
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
    workdir = (parts.get("workdir") or [""])[0]
    return Survey(frozenset(parts.get("stored", [])) - {""}, frozenset(parts.get("missing", [])) - {""}, check,
                  workdir)  # fmt: skip


def survey(
    transport: Transport, workdir: str, snaps: Sequence[Snapshot], python: str | None, objects_of: Snapshot | None,
    shared: bool = False,
) -> Survey:  # fmt: skip
    """Ask the cluster, once: the snapshots stored, the files of ``objects_of`` it lacks, ``python``'s version."""
    wanted = b""
    if objects_of is not None:
        wanted = "".join(f"{d}\n" for d in sorted({f.digest for f in objects_of.files})).encode()
    got = transport.run(survey_script(workdir, snaps, python, objects_of is not None, shared), wanted)
    text = got.stdout.decode(errors="replace")
    refuse(transport.cluster, text)
    return read_survey(text, python)
