"""The journal: concurrent appends from real processes, torn lines, lookups by job id, spec and name."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from slurmgen.errors import SlurmgenError, UsageError
from slurmgen.journal import Entry, Journal, find, find_home, home, slurm_cluster
from slurmgen.slurm.ids import JobId
from slurmgen.submission.targets import resolve

WRITERS, EACH = 6, 60


def entry(token: str, event: str = "submitted", job_id: str | None = None, **kw: object) -> Entry:
    fields: dict[str, object] = {"name": "train", "spec": "/w/train.yaml", "run_dir": f"/w/runs/{token}",
                                 "script": f"/w/runs/{token}/job.sbatch", "time": 1.0, "job_id": job_id}  # fmt: skip
    fields.update(kw)
    return Entry(event=event, token=token, **fields)  # type: ignore[arg-type]


def _write_many(base: str, writer: int) -> None:
    journal = Journal(Path(base))
    for i in range(EACH):
        # long lines: a torn or interleaved write would show up as a line that does not parse
        journal.append(entry(f"w{writer}-{i}", job_id=str(writer * 1000 + i), extra={"pad": "x" * 3000}))


def test_concurrent_processes_lose_and_mix_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert len(lines) == WRITERS * EACH
    entries = Journal(tmp_path).entries()
    assert len(entries) == WRITERS * EACH  # every line parses
    assert len({e.token for e in entries}) == WRITERS * EACH
    for w in range(WRITERS):  # each writer's lines in its own order
        mine = [e.token for e in entries if e.token.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(EACH)]


def test_a_torn_line_is_skipped(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(entry("a", job_id="1"))
    with open(journal.path, "a") as f:
        f.write('{"event":"submitted","token":"b","na')  # a crash mid-write
    journal.append(entry("c", job_id="3"))
    assert [e.token for e in journal.entries()] == ["a", "c"]
    assert (tmp_path / "journal.jsonl").stat().st_mode & 0o777 == 0o600


def test_jobs_lookups(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(entry("a", "submitting"))
    journal.append(entry("a", job_id="10"))
    journal.append(entry("b", job_id="11", name="eval", spec="/w/eval.yaml", array=True))
    journal.append(entry("c", job_id="12"))
    journal.append(entry("d", "unknown"))
    assert [e.job_id for e in journal.jobs()] == ["10", "11", "12"]
    found = {text: getattr(journal.find(text), "token", None) for text in ("11_3", "12+1", "12.batch", "99")}
    assert found == {"11_3": "b", "12+1": "c", "12.batch": "c", "99": None}
    assert journal.last_for("train").job_id == "12"  # type: ignore[union-attr]
    assert journal.last_for("../eval.yaml", cwd=Path("/w/sub")).job_id == "11"  # type: ignore[union-attr]
    assert [e.token for e in journal.unresolved()] == ["d"]


def test_targets(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(entry("a", job_id="10"))
    jobs = journal.jobs()
    assert resolve("10", jobs, journal.path).entry is not None
    assert resolve("10_2", jobs, journal.path).key == "10_2"
    assert resolve("train", jobs, journal.path).job == JobId(10)
    assert resolve("77.batch", jobs, journal.path).key == "77" and resolve("77", jobs, journal.path).entry is None
    for bad in ("10; scancel 1", "--full", "nothing"):
        with pytest.raises(UsageError, match="not a Slurm job id"):
            resolve(bad, jobs, journal.path)


def test_a_job_is_its_id_on_its_cluster(tmp_path: Path) -> None:
    """Two clusters of a multi-cluster site count their own ids: job 42 of each is a job of its own, found by its
    cluster (sbatch named it); a bare 42 is the newest. Over ssh the entry's `cluster` is the profile's name and
    Slurm's cluster is in its extra."""
    journal = Journal(tmp_path)
    journal.append(entry("a", job_id="42", cluster="alpha"))
    journal.append(entry("b", job_id="42", cluster="beta"))
    journal.append(entry("c", job_id="42", cluster="login", extra={"profile": "login", "slurm_cluster": "gamma"}))
    journal.append(entry("d", job_id="43", cluster="login", extra={"profile": "login"}))
    jobs = journal.jobs()
    assert [(e.token, slurm_cluster(e)) for e in jobs] == [("a", "alpha"), ("b", "beta"), ("c", "gamma"), ("d", None)]
    assert [find(jobs, "42_1", c).token for c in ("alpha", "beta", "gamma", None)] == ["a", "b", "c", "c"]  # type: ignore[union-attr]
    assert find(jobs, "42", "delta") is None
    target = resolve("beta:42", jobs, journal.path)
    assert (target.entry, target.cluster, target.label) == (jobs[1], "beta", "beta:42")
    assert resolve("42;gamma", jobs, journal.path).label == "gamma:42"
    unknown = resolve("delta:42", jobs, journal.path)  # named, not in the journal: Slurm is asked on delta
    assert (unknown.entry, unknown.cluster) == (None, "delta")
    assert resolve("43", jobs, journal.path).cluster is None  # a profile's job without Slurm's cluster


def test_where_the_journal_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    assert home({}, sub) == sub / ".slurmgen"
    assert home({"SLURMGEN_HOME": str(tmp_path / "h")}, sub) == tmp_path / "h"
    assert find_home({}, sub) == sub / ".slurmgen"  # nothing anywhere: where a submit would write
    Journal(tmp_path / ".slurmgen").append(entry("x", job_id="1"))
    assert find_home({}, sub) == tmp_path / ".slurmgen"  # readers look upwards, like git
    monkeypatch.chdir(sub)
    assert find_home({"SLURMGEN_HOME": "rel"}) == Path(os.getcwd()) / "rel"


def test_corrupt_lines_are_skipped_with_one_warning(tmp_path: Path) -> None:
    said: list[str] = []
    journal = Journal(tmp_path, warn=said.append)
    journal.append(entry("a", job_id="1"))
    with open(journal.path, "ab") as f:
        f.write(b"[1, 2, 3]\n")  # valid JSON, not an object
        f.write(b'{"event": "submitted", "token": "\xff\xfe"}\n')  # not UTF-8
        f.write(b'{"event": 5, "token": "x"}\n')  # an object of another shape
        f.write(b"[" * 5000 + b"\n")  # nesting that json.loads answers with RecursionError
    journal.append(entry("c", job_id="3"))
    assert [e.token for e in journal.entries()] == ["a", "c"]
    assert [e.job_id for e in journal.jobs()] == ["1", "3"]
    assert said == [f"warning: {journal.path}: skipped line 2 (a JSON list, not an object) and 3 more; "
                    "the other entries are read"]  # fmt: skip


def test_a_directory_in_the_journals_place_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "journal.jsonl").mkdir()
    journal = Journal(tmp_path)
    message = f"{tmp_path / 'journal.jsonl'}: is a directory, not the journal; move it away (the journal is a file)"
    with pytest.raises(SlurmgenError) as reading:
        journal.entries()
    assert str(reading.value) == message
    with pytest.raises(SlurmgenError) as appending:
        journal.append(entry("a", job_id="1"))
    assert str(appending.value) == message
