"""The state of many remote jobs in one round trip, and Slurm's client commands run through a transport.

One script asks, in order: `squeue` for every job (live ones), then `sacct` for those squeue no longer lists
(finished ones, where accounting is on), then `scontrol show job` for those sacct could not answer (accounting
off: Slurm keeps a finished job there MinJobAge seconds, slurm.conf(5)), then the run's own records on the cluster
(`<log dir>/history/batch-shell.jsonl`, slurmgen.run_history) for what Slurm has forgotten. Choosing among the
answers is pure (`decide`). COMPLETING is not final: the job's processes may still be running (squeue(1) JOB STATE
CODES), so a COMPLETING job is live whatever else says.

sacct's exit codes follow slurmgen.slurm.sacct's rule: before 25.11 a code of 128 or more reads 128 less (a batch
shell that exited 143 reads `15:0`), so the script asks `sacct --version` too, and a code that may not be the
job's own is taken from `scontrol show job` while Slurm still has the job, else from the run's own record where
that agrees with it, else as sacct printed it.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmgen.backends.slurm_ssh.store_trust import SG_OWN
from slurmgen.errors import SchedulerError, SchedulerMissing
from slurmgen.remote.transport import Transport
from slurmgen.slurm.client import CommandMissing, Runner
from slurmgen.slurm.ids import check_cluster_name, version_tuple
from slurmgen.slurm.parse import SQUEUE_FORMAT, SQUEUE_SEPARATOR, parse_squeue
from slurmgen.slurm.sacct import SacctRow, parse_rows
from slurmgen.slurm.showjob import job_info, parse_show_job

LIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STOPPED"})
SECTION = "@@slurmgen-section "
MISSING = "@@slurmgen-missing"


def transport_runner(transport: Transport) -> Runner:
    """A SlurmClient runner that runs each argv on the cluster (quoted, never through a user's shell words).
    ``env`` is not sent: the cluster's own Slurm configuration applies there."""

    def run(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        del env
        # The command's stderr goes to a section of its own: the login's noise on ssh's stderr never mixes in.
        script = (
            f"command -v {shlex.quote(argv[0])} >/dev/null 2>&1 || {{ echo '{MISSING}'; exit 127; }}\n"
            f'e=$(mktemp); {shlex.join(argv)} 2>"$e"; rc=$?; echo "{SECTION}stderr"; cat "$e"; rm -f "$e"; exit $rc'
        )
        got = transport.run(script, timeout=timeout + 30)
        text = got.stdout.decode(errors="replace")
        if got.returncode == 127 and text.strip() == MISSING:
            raise CommandMissing(missing_line(transport.cluster, argv[0]))
        out, _, err = text.partition(SECTION + "stderr\n")
        return subprocess.CompletedProcess(list(argv), got.returncode, out, err)

    return run


def missing_line(cluster: str, command: str) -> str:
    """The one line for a command the login node does not find, even after the login profile (transport)."""
    return (
        f"cluster {cluster}: {command} is not found on the login node, neither on the PATH of a command over ssh "
        "nor after the login profile bash reads (/etc/profile, ~/.bash_profile, ~/.profile): load it there "
        "(`module load slurm` in ~/.bashrc or ~/.bash_profile), or ask the cluster's admins where Slurm's commands are"
    )


def status_script(jobs: Sequence[str], log_dirs: Mapping[str, str], cluster: str | None = None) -> str:
    """The one script: its output is sections (`@@slurmgen-section NAME`) the parser splits. sacct and scontrol
    run only when squeue has not listed every job, and once each for all of those (a round trip stays a few
    commands, however many jobs). ``cluster``: the jobs' cluster of a multi-cluster site, named to each command
    (`--clusters`; with --noheader squeue prints no `CLUSTER:` line, src/squeue/squeue.c)."""
    ids = ",".join(jobs)
    on = "" if cluster is None else f" --clusters={shlex.quote(check_cluster_name(cluster))}"
    lines = [
        # no squeue even after the login profile (slurmgen.remote.transport): said, not every job UNKNOWN
        f"command -v squeue >/dev/null 2>&1 || {{ echo '{MISSING}'; exit 127; }}",
        f"q=$(squeue{on} --noheader --states=all --jobs={shlex.quote(ids)} --format={shlex.quote(SQUEUE_FORMAT)}"
        " 2>/dev/null)",
        f"echo '{SECTION}squeue'; printf '%s\\n' \"$q\"",
        # live jobs are answered by squeue; the others (ended, or not listed) are asked of sacct and scontrol
        f"declare -A seen; while IFS=$'\\x{ord(SQUEUE_SEPARATOR):02x}' read -r i _ s _; do case \" $s \" in "
        + "|".join(f"' {w} '" for w in sorted(LIVE))
        + ') seen["$i"]=1;; esac; done <<<"$q"',
        "m=; for j in " + " ".join(shlex.quote(j) for j in jobs) + '; do [ -n "${seen[$j]:-}" ] || m="$m,$j"; done',
        f"echo '{SECTION}sacct'",
        f'if [ -n "$m" ]; then sacct --version 2>/dev/null; sacct{on} --noheader --parsable2 --allocations'
        ' --jobs="${m#,}"'
        " --format=JobID,State,ExitCode 2>/dev/null || echo '@@no-accounting'; fi",
        f"echo '{SECTION}scontrol'",
        f'[ -n "$m" ] && scontrol{on} show job -o 2>/dev/null',
        "true",
    ]
    for job, log_dir in log_dirs.items():
        # the run's own record is believed only in directories of the user's own that others cannot write
        dirs = " ".join(shlex.quote(d) for d in (log_dir, f"{log_dir}/history"))
        path = shlex.quote(f"{log_dir}/history/batch-shell.jsonl")
        lines += [f"echo '{SECTION}record {job}'",
                  f'ok=1; for p in {dirs} {path}; do sg_own "$p" >/dev/null || ok=; done; '
                  f'[ -n "$ok" ] && tail -n 200 {path} 2>/dev/null']  # fmt: skip
    if log_dirs:
        lines.insert(0, SG_OWN.rstrip("\n"))
    lines.append("true")
    return "\n".join(lines)


def sections(text: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith(SECTION):
            name = line[len(SECTION) :]
            found.setdefault(name, [])
        elif name:
            found[name].append(line)
    return {k: "\n".join(v) for k, v in found.items()}


@dataclass(frozen=True)
class RemoteState:
    state: str
    source: str  # squeue, sacct, scontrol, record, none
    exit_code: int | None = None
    # from the run's own record (the batch shell's, read in the same round trip): the requeues (runs after the
    # first) and the restarts of the step inside the allocation; None where no record was read
    requeues: int | None = None
    step_restarts: int | None = None


Events = list[dict[str, object]]


def _record_events(text: str) -> Events:
    """The events of a job's record section, parsed once for every reader of it in `decide`."""
    found = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by a full disk or a crash: the others still count
        if isinstance(event, dict):
            found.append(event)
    return found


def _counts(events: Events) -> tuple[int | None, int | None]:
    """(requeues, step restarts) from the batch shell's record: its run starts and its restarts of the step."""
    runs = [e.get("run") for e in events if e.get("event") == "run-start"]
    numbers = [r for r in runs if isinstance(r, int) and not isinstance(r, bool)]
    if not numbers:
        return None, None
    return max(numbers) - 1, sum(e.get("event") == "restart" for e in events)


def _from_record(events: Events) -> RemoteState | None:
    """The last run's end in the run's own record; None when no run ended there."""
    ends = [e for e in events if e.get("event") == "run-end"]
    if not ends:
        return None
    last = ends[-1]
    code = last.get("exit_code")
    state = "COMPLETED" if code == 0 else "REQUEUED" if last.get("ended") == "requeued" else "FAILED"
    return RemoteState(state, "record", code if isinstance(code, int) else None)


def decide(jobs: Sequence[str], text: str) -> dict[str, RemoteState]:
    """Each job's state from the sections of the one call. Pure."""
    parts = sections(text)
    queue = {str(e.job_id): e for e in parse_squeue(parts.get("squeue", ""))}
    accounting = {row.job: row for row in sacct_rows(parts.get("sacct", ""))}
    records = {job: _record_events(parts.get(f"record {job}", "")) for job in jobs}
    shown = {}
    for rec in parse_show_job(parts.get("scontrol", "")):
        try:
            info = job_info(rec)
        except SchedulerError:
            continue  # a record without id or state answers for no job
        shown[str(info.job_id)] = info
    out: dict[str, RemoteState] = {}
    for job in jobs:
        entry = queue.get(job)
        if entry is not None and entry.state_name in LIVE:
            out[job] = RemoteState(entry.state_name, "squeue")
            continue
        row = accounting.get(job)
        kept = shown.get(job)
        if row is not None and (row.state not in LIVE or row.state == "COMPLETING"):
            if row.state in LIVE:
                out[job] = RemoteState(row.state, "sacct")
                continue
            if not row.exact and kept is not None and kept.state_name not in LIVE:
                out[job] = RemoteState(kept.state_name, "scontrol", kept.exit_code)  # the code as it was
                continue
            out[job] = RemoteState(row.state, "sacct", _exit_code(row, records[job]))
            continue
        if kept is not None:
            out[job] = RemoteState(kept.state_name, "scontrol", kept.exit_code if kept.state_name not in LIVE else None)
            continue
        if entry is not None:  # squeue --states=all still lists it, finished
            out[job] = RemoteState(entry.state_name, "squeue")
            continue
        record = _from_record(records[job])
        out[job] = record if record is not None else RemoteState("UNKNOWN", "none")
    for job, state in out.items():
        requeues, restarts = _counts(records[job])
        out[job] = dataclasses.replace(state, requeues=requeues, step_restarts=restarts)
    return out


def sacct_rows(text: str) -> list[SacctRow]:
    """The rows of the sacct section, read by the rule of the version `sacct --version` printed before them
    (`slurm 22.05.8`; none: an unknown version, whose codes are not taken as exact)."""
    version = None
    for line in text.splitlines():
        if line.startswith("slurm ") and "|" not in line:
            version = version_tuple(line.removeprefix("slurm "))
    return parse_rows(text, version)


def _exit_code(row: SacctRow, record: Events) -> int | None:
    """sacct's code, or the run's own where sacct's may be 128 less (slurmgen.slurm.sacct) and the record agrees."""
    if row.exit_code is None or row.exact:
        return row.exit_code
    own = _from_record(record)
    if own is not None and own.exit_code is not None and own.exit_code in (row.exit_code, row.exit_code + 128):
        return own.exit_code
    return row.exit_code


def remote_states(
    transport: Transport, jobs: Sequence[str], log_dirs: Mapping[str, str], cluster: str | None = None
) -> dict[str, RemoteState]:
    """Every job's state in one round trip over the transport (the jobs of one cluster of a multi-cluster site)."""
    got = transport.run(status_script(jobs, log_dirs, cluster))
    text = got.stdout.decode(errors="replace")
    if got.returncode == 127 and text.strip() == MISSING:
        raise SchedulerMissing(missing_line(transport.cluster, "squeue"))
    return decide(jobs, text)
