"""The submission journal: one JSON line per event, appended under a lock, read by status/logs/requeue.

It lives in `.slurmgen/journal.jsonl` under the directory you submit from (like `.git`), or under
$SLURMGEN_HOME. Appends are single `write` calls of one line on an O_APPEND descriptor under `flock`, so
concurrent submissions neither interleave nor lose lines; a torn last line (a crash mid-write) is skipped on read.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HOME_ENV = "SLURMGEN_HOME"


@dataclass(frozen=True)
class Entry:
    event: str  # "submitting" (before sbatch), "submitted", "unknown" (sbatch timed out), "failed"
    token: str  # unique per submission; also in the job's --comment, so a lost reply can be recovered
    name: str
    spec: str  # absolute path of the spec file
    run_dir: str
    script: str
    time: float  # seconds since the epoch
    job_id: str | None = None
    cluster: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))


def home(env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV])
    return Path(cwd or os.getcwd()) / ".slurmgen"


class Journal:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.path = base / "journal.jsonl"

    def append(self, entry: Entry) -> None:
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = (entry.to_json() + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            written = os.write(fd, line)
            if written != len(line):  # pragma: no cover - a full disk; never leave half a line
                raise OSError(f"short write to {self.path}")
            os.fsync(fd)
        finally:
            os.close(fd)

    def entries(self) -> list[Entry]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out: list[Entry] = []
        for line in text.splitlines():
            try:
                out.append(Entry(**json.loads(line)))
            except (ValueError, TypeError):
                continue  # a torn or foreign line: skip it, keep the rest
        return out

    def jobs(self) -> list[Entry]:
        """Submitted jobs, oldest first, one entry per job id (the latest event wins)."""
        latest: dict[str, Entry] = {}
        for entry in self.entries():
            if entry.job_id:
                latest.pop(entry.job_id, None)
                latest[entry.job_id] = entry
        return list(latest.values())

    def last_for(self, spec_or_name: str) -> Entry | None:
        """The newest job whose spec file or job name matches."""
        target = str(Path(spec_or_name).resolve()) if Path(spec_or_name).exists() else None
        for entry in reversed(self.jobs()):
            if entry.spec == target or entry.name == spec_or_name:
                return entry
        return None

    def find(self, job_id: str) -> Entry | None:
        base = job_id.split("_", 1)[0].split("+", 1)[0]
        for entry in reversed(self.jobs()):
            if entry.job_id in (job_id, base):
                return entry
        return None
