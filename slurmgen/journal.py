"""The submission journal: one JSON line per event, appended under a lock, read by status/logs/requeue/cancel.

It lives in `.slurmgen/journal.jsonl` under the directory you submit from, or under $SLURMGEN_HOME. Readers
look in the current directory and then its parents (like git), so `slurmgen status` works from a subdirectory; the
search stops at a directory this user does not own, and a journal is read only under the trust rule (trust.py).
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
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from slurmgen import trust
from slurmgen.errors import SlurmgenError

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

    @property
    def args(self) -> tuple[str, ...]:
        """The words given after `--` at submission (`slurmgen submit SPEC -- ARGS`), last in the job's command."""
        given = self.extra.get("args")
        return tuple(str(a) for a in given) if isinstance(given, list) else ()

    @classmethod
    def from_json(cls, line: str) -> Entry:
        """Raises ValueError for a line that is not one of ours: not JSON, not an object, a field of the wrong type."""
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        for name in ("event", "token", "name", "spec", "run_dir", "script"):
            if not isinstance(data.get(name), str):
                raise ValueError(f"its {name!r} is not text")
        if not isinstance(data.get("time"), int | float) or isinstance(data.get("time"), bool):
            raise ValueError("its 'time' is not a number")
        for name in ("job_id", "cluster", "log_dir"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"its {name!r} is not text")
        if not isinstance(data.get("extra", {}), dict):
            raise ValueError("its 'extra' is not an object")
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
        # Another user's directory (a world-writable /tmp or scratch root) may hold their forged `.slurmgen`:
        # the search ends where this user's own directories end (trust.py).
        if not trust.owned_by_me(str(directory)):
            return own
        # A directory where jobs were only run locally has only the local journal (slurmgen.local.local_jobs).
        if any((directory / DIR_NAME / where / FILE_NAME).is_file() for where in ("", "local")):
            if not trust.owned_by_me(str(directory / DIR_NAME)):
                return own  # someone else's `.slurmgen` in a directory of ours: never theirs, never past it
            return directory / DIR_NAME
    return own


def _warn_on_stderr(line: str) -> None:
    print(line, file=sys.stderr)


class Journal:
    def __init__(self, base: Path, warn: Callable[[str], None] = _warn_on_stderr) -> None:
        self.base = base
        self.path = base / FILE_NAME
        self.warn = warn
        self._warned = False

    def append(self, entry: Entry) -> None:
        line = (entry.to_json() + "\n").encode()
        try:
            trust.own_dir(str(self.base), mode=0o700)
            fd = trust.open_write(str(self.path), readable=True)
        except OSError as exc:
            raise _unusable(self.path, exc) from None
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
        """Every readable entry, oldest first. A line that is not one of ours (torn by a crash, non-UTF-8 bytes,
        JSON of another shape) is skipped, the rest kept: one warning per journal names the first such line."""
        if self.path.is_dir() and not self.path.is_symlink():
            raise _unusable(self.path, IsADirectoryError())
        try:
            data = trust.read_bytes(str(self.path), "believed")  # a journal names scripts that resume runs
        except OSError as exc:
            raise _unusable(self.path, exc) from None
        if data is None:
            return []
        out: list[Entry] = []
        skipped: list[tuple[int, str]] = []
        for number, raw in enumerate(data.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                out.append(Entry.from_json(raw.decode("utf-8")))
            except UnicodeDecodeError:
                skipped.append((number, "not UTF-8 text"))
            except (json.JSONDecodeError, RecursionError):
                skipped.append((number, "not JSON"))
            except (ValueError, TypeError) as exc:
                skipped.append((number, str(exc)))
        if skipped and not self._warned:
            self._warned = True
            first, why = skipped[0]
            more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
            self.warn(f"warning: {self.path}: skipped line {first} ({why}){more}; the other entries are read")
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


def _unusable(path: Path, exc: OSError) -> SlurmgenError:
    if isinstance(exc, IsADirectoryError) or path.is_dir():
        return SlurmgenError(f"{path}: is a directory, not the journal; move it away (the journal is a file)")
    return SlurmgenError(f"{path}: cannot use the journal: {exc.strerror or exc}")


def unresolved(entries: list[Entry]) -> list[Entry]:
    settled = {e.token for e in entries if e.event in ("submitted", "failed")}
    pending: dict[str, Entry] = {}
    for entry in entries:
        if entry.token not in settled and entry.event in ("submitting", "unknown"):
            pending[entry.token] = entry
    return list(pending.values())


def latest_per_job(entries: list[Entry]) -> list[Entry]:
    """One entry per job, the latest; a job is its id on its cluster (job 42 of two clusters is two jobs)."""
    latest: dict[tuple[str | None, str], Entry] = {}
    for entry in entries:
        if entry.job_id:
            key = (entry.cluster, entry.job_id)
            latest.pop(key, None)
            latest[key] = entry
    return list(latest.values())


# An ssh submission's extra: the cluster its sbatch named (its `cluster` is the profile's name).
SLURM_CLUSTER = "slurm_cluster"


def slurm_cluster(entry: Entry | None) -> str | None:
    """The cluster of a multi-cluster site that sbatch named for this job (`123;name`), which every later command
    names again; None for a site with one cluster. A submission through a cluster profile (`extra["profile"]`)
    keeps the profile's name in `cluster` and Slurm's in `extra["slurm_cluster"]`."""
    if entry is None:
        return None
    if "profile" in entry.extra:
        named = entry.extra.get(SLURM_CLUSTER)
        return named if isinstance(named, str) and named else None
    return entry.cluster or None


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


def find(jobs: list[Entry], job_id: str, cluster: str | None = None) -> Entry | None:
    """The journal entry of a job id in any form: 123, 123_4 (array task of 123), 123+1 (het component); with
    ``cluster``, only a job sbatch placed on that cluster (the newest of any cluster without)."""
    base = job_id.split(".", 1)[0].split("_", 1)[0].split("+", 1)[0]
    for entry in reversed(jobs):
        if entry.job_id in (job_id, base) and (cluster is None or slurm_cluster(entry) == cluster):
            return entry
    return None


def new_token(clock: Callable[[], float] = time.time) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock()))
    return f"{stamp}-{os.urandom(4).hex()}"  # not secrets.token_hex: that import costs more than a submit
