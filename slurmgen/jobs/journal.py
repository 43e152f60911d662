"""The submission journal: one JSON line per event, appended under a lock, read by status/logs/requeue/cancel.

It lives in `.slurmgen/journal.jsonl` under the directory you submit from, or under $SLURMGEN_HOME. Readers
look in the current directory and then its parents (like git), so `slurmgen status` works from a subdirectory.
Appends are single `write` calls of one line on an O_APPEND descriptor under `flock`, so concurrent submissions
neither interleave nor lose lines; a torn last line (a crash mid-write) is skipped on read.

Events of one submission share its token: "submitting" (written before sbatch runs, so a crash or a timeout
leaves a trace), then "submitted" (with the job id), "unknown" (sbatch timed out and the job was not found), or
"failed" (sbatch refused it).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

HOME_ENV = "SLURMGEN_HOME"
DIR_NAME = ".slurmgen"
FILE_NAME = "journal.jsonl"
# Each submission's token ends the job's --comment as `slurmgen:<token>`: found again after a lost sbatch reply.
TOKEN_PREFIX = "slurmgen:"  # noqa: S105 - a marker, not a password


@dataclass(frozen=True)
class Entry:
    event: str  # "submitting", "submitted", "unknown", "failed"
    token: str  # unique per submission; also in the job's --comment, so a lost sbatch reply can be recovered
    name: str  # the job name (spec field name)
    spec: str  # absolute path of the spec file
    run_dir: str
    script: str
    time: float  # seconds since the epoch
    job_id: str | None = None  # as sbatch printed it: the job id, or the array job id of an array
    cluster: str | None = None
    log_dir: str | None = None  # absolute directory of the batch log (spec field output, resolved)
    array: bool = False  # an array job: logs and requeue are per task (<job>_<task>)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Entry:
        data = json.loads(line)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})  # newer versions may add keys


def home(env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """Where submissions from ``cwd`` are recorded: $SLURMGEN_HOME, else ``cwd/.slurmgen``."""
    env = os.environ if env is None else env
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV]).absolute()
    return Path(cwd or os.getcwd()).absolute() / DIR_NAME


def find_home(env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """Where to read from: $SLURMGEN_HOME, else the nearest ``.slurmgen`` with a journal in ``cwd`` or above."""
    env = os.environ if env is None else env
    own = home(env, cwd)
    if env.get(HOME_ENV):
        return own
    for directory in (own.parent, *own.parent.parents):
        # A directory where jobs were only run locally has only the local journal (slurmgen.local.local_jobs).
        if any((directory / DIR_NAME / where / FILE_NAME).is_file() for where in ("", "local")):
            return directory / DIR_NAME
    return own


class Journal:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.path = base / FILE_NAME

    def append(self, entry: Entry) -> None:
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = (entry.to_json() + "\n").encode()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a torn last line (a writer killed mid-write) must not swallow ours
            written = os.write(fd, line)
            if written != len(line):  # pragma: no cover - a full disk; never leave half a line
                raise OSError(f"short write to {self.path}")
            # No fsync: once written the line survives slurmgen being killed (it is in the page cache); only a
            # power cut could lose it, which is not worth a disk flush on every submission.
        finally:
            os.close(fd)  # closing releases the lock

    def entries(self) -> list[Entry]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out: list[Entry] = []
        for line in text.splitlines():
            try:
                out.append(Entry.from_json(line))
            except (ValueError, TypeError):
                continue  # a torn or foreign line: skip it, keep the rest
        return out

    def jobs(self) -> list[Entry]:
        """Submitted jobs, oldest first, one entry per job id (the latest event wins)."""
        return latest_per_job(self.entries())

    def unresolved(self) -> list[Entry]:
        """Submissions whose outcome is not known: sbatch timed out (or slurmgen died) before a job id came."""
        return unresolved(self.entries())

    def last_for(self, spec_or_name: str, cwd: Path | None = None) -> Entry | None:
        return last_for(self.jobs(), spec_or_name, cwd)

    def find(self, job_id: str) -> Entry | None:
        return find(self.jobs(), job_id)


def unresolved(entries: list[Entry]) -> list[Entry]:
    settled = {e.token for e in entries if e.event in ("submitted", "failed")}
    pending: dict[str, Entry] = {}
    for entry in entries:
        if entry.token not in settled and entry.event in ("submitting", "unknown"):
            pending[entry.token] = entry
    return list(pending.values())


def latest_per_job(entries: list[Entry]) -> list[Entry]:
    latest: dict[str, Entry] = {}
    for entry in entries:
        if entry.job_id:
            latest.pop(entry.job_id, None)
            latest[entry.job_id] = entry
    return list(latest.values())


def last_for(jobs: list[Entry], spec_or_name: str, cwd: Path | None = None) -> Entry | None:
    """The newest job whose spec file (a path, resolved against ``cwd``) or job name matches."""
    path = Path(spec_or_name)
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    target = str(path.resolve())
    for entry in reversed(jobs):
        if entry.spec == target or entry.name == spec_or_name:
            return entry
    return None


def find(jobs: list[Entry], job_id: str) -> Entry | None:
    """The journal entry of a job id in any form: 123, 123_4 (array task of 123), 123+1 (het component)."""
    base = job_id.split(".", 1)[0].split("_", 1)[0].split("+", 1)[0]
    for entry in reversed(jobs):
        if entry.job_id in (job_id, base):
            return entry
    return None
