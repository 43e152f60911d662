"""A kind of job that exists only in the tests: it runs nothing and records every call in a directory. It is one
module (this one) and one registry row (`row`): proof that a new kind touches nothing else."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from slurmgen.backends.interface import DryRun, Followed, JobHandle, LogView, Report, Request, Say, Submitted, Warn
from slurmgen.backends.registry import Kind
from slurmgen.errors import UsageError
from slurmgen.queries.goodput_view import Goodput
from slurmgen.slurm.client import SlurmClient
from slurmgen.spec.profile import ClusterProfile

PREFIX = "rec-"
CANNOT = {
    "would_run": "a recorded job asks no scheduler",
    "follow": "a recorded job has ended when it is recorded",
    "requeue": "a recorded job is never requeued: resume it",
    "site_client": "a recorded job has no Slurm to ask",
}


class RecordedJob:
    def __init__(self, place: Path) -> None:
        self.place = place

    def _note(self, call: str) -> None:
        with (self.place / "calls").open("a") as calls:
            calls.write(call + "\n")

    @property
    def label(self) -> str:
        return self.place.name

    @property
    def notes(self) -> tuple[str, ...]:
        return ()

    def status(self) -> Report:
        self._note("status")
        return Report(out=(f"{self.label} {self.state()}",))

    def state(self) -> str:
        return "COMPLETED"

    def exit_code(self) -> int | None:
        return 0

    def wait(self, pause: Callable[[float], None]) -> str:
        self._note("wait")
        return self.state()

    def logs(self, rank: int | None, node: str | None) -> LogView:
        self._note("logs")
        log = self.place / "job.log"
        return LogView(files=lambda: [log], others=lambda: [log], ended=lambda: True, poll=0.1,
                       missing=lambda: f"job {self.label}: no log")  # fmt: skip

    def code(self) -> str | None:
        return None

    def args(self) -> tuple[str, ...]:
        return ()

    def history_points(self) -> list[tuple[int, str, list[Path]]] | None:
        return None  # one job

    def history_dirs(self) -> tuple[list[Path], str]:
        self._note("history")
        return [self.place], f"job {self.label}: no run history"

    def cancel(self, signal: str | None, to: str | None) -> Report:
        self._note("cancel")
        return Report(notes=(f"job {self.label} already ended; nothing to cancel",))

    def requeue(self, hold: bool, finished: bool) -> Report:
        raise UsageError(CANNOT["requeue"])

    def resume(self, say: Say) -> Report:
        self._note("resume")
        return Report(notes=(f"job {self.label} completed: nothing to resume",))

    def point(self, index: int) -> JobHandle:
        raise UsageError(f"--point: {self.label!r} is not a sweep")

    def goodput(self) -> Goodput:
        self._note("report")
        return Goodput({"goodput": None, "runs": []}, (), lambda: "", lambda: ())


class Recorded:
    name = "recorded"
    cannot: Mapping[str, str] = CANNOT

    def __init__(self, root: Path) -> None:
        self.root = root

    def dry_run(self, request: Request, warn: Warn) -> DryRun:
        return DryRun(f"# {request.source.path}\n", (f"would record {request.source.path}",))

    def would_run(self, request: Request, warn: Warn) -> str:
        raise UsageError(CANNOT["would_run"])

    def launch(self, request: Request, warn: Warn) -> Submitted:
        self.root.mkdir(parents=True, exist_ok=True)
        label = f"{PREFIX}{len(list(self.root.iterdir())) + 1}"
        place = self.root / label
        place.mkdir()
        text = request.source.path.read_text()
        (place / "request.json").write_text(json.dumps({"spec": str(request.source.path), "text": text}))
        (place / "job.log").write_text(f"recorded {request.source.path.name}\n{text}")
        (place / "calls").write_text("launch\n")
        return Submitted(label, f"recorded job {label}")

    def follow(self, label: str, progress: Callable[[str], None]) -> Followed:
        raise UsageError(CANNOT["follow"])

    def site_client(self) -> SlurmClient:
        raise UsageError(CANNOT["site_client"])

    def job(self, label: str) -> JobHandle:
        place = self.root / label
        if not place.is_dir():
            raise UsageError(f"no recorded job {label}")
        return RecordedJob(place)


def row(root: Path) -> Kind:
    """The registry row of the kind: its backend, and the ids it gives out (`rec-N`)."""

    def make(profile: ClusterProfile | None, base: Path | None) -> Recorded:
        return Recorded(root)

    return Kind(make, claims=lambda text: text.startswith(PREFIX), attach=lambda text, base: Recorded(root).job(text))
