"""Slurm's client commands: sbatch, scontrol, squeue and scancel, as argv lists with a timeout, never a shell.

The effect is one injected callable (``run``); what the commands print is parsed elsewhere: `scontrol show job` in
slurmgen.slurm.showjob, the other commands' output in slurmgen.slurm.parse, and the words for an id, a state and a
value in slurmgen.slurm.ids.

Standard library and slurmgen.errors only: the in-task runtime imports this module (for `scontrol requeue`), so
it must not pull in typer, jinja2 or yaml.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional, overload

from slurmgen.errors import SchedulerError, SchedulerMissing, UsageError
from slurmgen.signal_names import require_signal_name
from slurmgen.slurm.ids import (
    JobId,
    as_job_id,
    check_cluster_name,
)
from slurmgen.slurm.parse import (
    COMMENT_FORMAT,
    SQUEUE_FORMAT,
    QueueEntry,
    StepRecord,
    Submitted,
    TestOnly,
    parse_comments,
    parse_sbatch_output,
    parse_squeue,
    parse_steps,
    parse_test_only,
)
from slurmgen.slurm.showjob import JobInfo, job_info, parse_show_job

if TYPE_CHECKING:
    from slurmgen.slurm.array_queue import TaskRow

DEFAULT_TIMEOUT = 30.0  # seconds; a hung scontrol must not hang a task (submitit #1713)

# run(argv, env, timeout) -> CompletedProcess with text stdout/stderr. Raises what subprocess.run raises.
# Optional, not `X | None`: an alias is evaluated at import, and the batch shell's helper imports this on 3.9.
Runner = Callable[[Sequence[str], Optional[Mapping[str, str]], float], "subprocess.CompletedProcess[str]"]  # noqa: UP045


class CommandMissing(FileNotFoundError):
    """A command a runner did not find, with the one line that says where it looked and what to do (a runner
    that runs the commands on a cluster raises it: slurmgen.backends.slurm_ssh.remote_status)."""


def run_command(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
    """The default Runner: subprocess.run on an argv list, output captured as text, no shell."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        timeout=timeout,
        check=False,
    )


# --- errors Slurm reports, mapped to what the caller can act on ------------------------------------------


class InvalidJobId(SchedulerError):
    """Slurm does not know the job ("Invalid job id specified"): wrong id, or purged after MinJobAge."""


class RequeueDisabled(SchedulerError):
    """ "Requested operation is presently disabled": the job has --no-requeue (or the site JobRequeue=0)."""


class SchedulerTimeout(SchedulerError):
    """A Slurm command gave no answer in time. For sbatch the job may exist or not: never retry blindly (sbatch(1)
    retries internally, and a timed-out reply may hide a job that exists: autosubmit #442); look for the submission's
    comment instead (SlurmClient.comments)."""


class ClusterUnreachable(SchedulerError):
    """A cluster named by --clusters (or SLURM_CLUSTERS) that Slurm cannot resolve: no slurmdbd, or not its name."""


class JobPending(SchedulerError):
    """ "Job is pending execution": the job is queued already (e.g. a second requeue right after one)."""


_UNKNOWN_JOB = "Slurm does not know job {job} (wrong id, or finished long ago)"
_KNOWN_ERRORS: tuple[tuple[str, type[SchedulerError], str], ...] = (
    ("Invalid job id specified", InvalidJobId, _UNKNOWN_JOB),
    (
        "Requested operation is presently disabled",
        RequeueDisabled,
        "job {job} cannot be requeued: it was submitted with --no-requeue (or the cluster sets JobRequeue=0)",
    ),
    ("Job is pending execution", JobPending, "job {job} is pending already; there is nothing to requeue"),
    (
        "Only batch jobs are accepted",
        SchedulerError,
        "job {job} is not a batch job; only sbatch jobs requeue",
    ),
)


# What a client prints when it has no controller to talk to (no slurm.conf and no DNS SRV record for configless
# Slurm, or a controller that does not answer): "no Slurm here" (exit 4), not "Slurm refused" (exit 3).
_UNREACHABLE = (
    "Could not establish a configuration source",
    "Unable to process configuration file",
    "Unable to contact slurm controller",
)


# `scontrol show job 12_34` of a job whose task 34 (or het component) is gone: "Job 12_34 not found", exit 1, on
# stdout up to 25.11 and on stderr from 26.05 (src/scontrol/info_job.c, scontrol_print_job; SchedMD/slurm commit
# 047f923908). Like "Invalid job id specified", Slurm does not know that job.
_JOB_NOT_FOUND = re.compile(r"^Job \d+(?:_\d+|\+\d+)? not found$", re.MULTILINE)


# `-M name` (or SLURM_CLUSTERS) that Slurm cannot resolve: the names are looked up in slurmdbd, so a site without
# one (AccountingStorageType=accounting_storage/none) refuses every name, its own ClusterName included
# (src/common/proc_args.c, print_db_notok; measured on 22.05.8: "Problem talking to database", then this line).
_CLUSTER_UNREACHABLE = re.compile(r"'(?P<name>[^']*)' can't be reached now, or it is an invalid entry for "
                                  r"(?P<by>--cluster|SLURM_CLUSTERS)")  # fmt: skip


def _failure(what: str, job: str, result: subprocess.CompletedProcess[str]) -> SchedulerError | SchedulerMissing:
    text = f"{result.stderr}\n{result.stdout}"  # every message below is matched on either stream
    for needle in _UNREACHABLE:
        if needle in text:
            return SchedulerMissing(f"{what}: no Slurm controller reachable from here ({needle.lower()}); run it "
                                    "where sbatch works, or set SLURM_CONF")  # fmt: skip
    for needle, kind, message in _KNOWN_ERRORS:
        if needle in text:
            return kind(f"{what}: " + message.format(job=job))
    if unreachable := _CLUSTER_UNREACHABLE.search(text):
        by = "--clusters" if unreachable["by"] == "--cluster" else "SLURM_CLUSTERS"
        return ClusterUnreachable(f"{what}: Slurm cannot reach cluster {unreachable['name']!r} named by {by}: names "
                              "resolve through the accounting database (slurmdbd), so check `sacctmgr list "
                              "clusters`, or drop the cluster where there is one cluster and no slurmdbd")  # fmt: skip
    if _JOB_NOT_FOUND.search(text):
        return InvalidJobId(f"{what}: " + _UNKNOWN_JOB.format(job=job))
    lines = [re.sub(r"^\S+: error: ", "", ln.strip()) for ln in result.stderr.splitlines() if ln.strip()]
    detail = "; ".join(lines) or result.stdout.strip() or "no message"
    return SchedulerError(f"{what} failed (exit {result.returncode}): {detail}")


# --- the submission environment ---------------------------------------------------------------------------

_INHERITED = re.compile(r"(SBATCH|SLURM|PMIX|SALLOC|SRUN)_")


def clean_submit_env(mapping: Mapping[str, str], keep: Iterable[str] = ()) -> dict[str, str]:
    """The environment to run sbatch in: the given one without inherited Slurm job variables.

    Input variables beat #SBATCH lines (sbatch(1) "INPUT ENVIRONMENT VARIABLES"), and SLURM_* left from an
    enclosing allocation leak into the new job (a SLURM_CPU_BIND pinned every rank to a few cores in
    goodfire-ai/spd #955; a stale SLURM_ARRAY_JOB_ID in submitit #1782).
    SLURM_CONF stays: it says which cluster to talk to (submitit #1814); so does SLURM_CLUSTERS, the user's
    `--clusters` (sbatch(1) "INPUT ENVIRONMENT VARIABLES"), whose choice sbatch's answer names (`123;name`).
    ``keep`` names more to keep.
    """
    kept = {"SLURM_CONF", "SLURM_CLUSTERS", *keep}
    return {k: v for k, v in mapping.items() if k in kept or not _INHERITED.match(k)}


# --- the client -------------------------------------------------------------------------------------------


def _on_cluster(argv: Sequence[str], cluster: str | None) -> list[str]:
    """``argv`` with `--clusters=<cluster>` right after the command's name: sbatch, squeue, scontrol and scancel
    all read `-M, --clusters` (their man pages), and scontrol only before its subcommand."""
    return list(argv) if cluster is None else [argv[0], f"--clusters={cluster}", *argv[1:]]


# `squeue -M name` prints `CLUSTER: name` before that cluster's rows unless --noheader is given
# (src/squeue/squeue.c, _multi_cluster); scontrol prints none (it takes one cluster only: src/scontrol/scontrol.c).
# slurmgen passes --noheader, but a site's wrapper or a later Slurm may print it: such a line is no row.
_CLUSTER_HEADER = re.compile(r"\ACLUSTER: \S+\n")


class SlurmClient:
    """Slurm's client commands. ``run`` is the only effect; ``env=None`` means this process's environment.
    ``cluster``: the cluster of a multi-cluster site every command names (`--clusters`); None: the local one."""

    def __init__(
        self,
        run: Runner = run_command,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cluster: str | None = None,
    ) -> None:
        self._run = run
        self._env = env
        self.timeout = timeout
        self.cluster = None if cluster is None else check_cluster_name(cluster)  # one argv word, never an option

    @property
    def env(self) -> Mapping[str, str]:
        """The environment the commands run in (this process's when none was given)."""
        return os.environ if self._env is None else self._env

    def on_cluster(self, cluster: str | None) -> SlurmClient:
        """This client, asking ``cluster`` (a job's cluster, as sbatch named it); itself for None or its own."""
        if cluster is None or cluster == self.cluster:
            return self
        return SlurmClient(self._run, self._env, self.timeout, cluster)

    @property
    def runner(self) -> Runner:
        """How each command is run: here, or on the cluster through its connection (the job's Python is asked the
        same way: slurmgen.python_check)."""
        return self._run

    def _call(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = _on_cluster(argv, self.cluster)
        try:
            result = self._run(argv, self._env if env is None else env, self.timeout)
        except CommandMissing as exc:
            raise SchedulerMissing(str(exc)) from None
        except FileNotFoundError:
            raise SchedulerMissing(
                f"{argv[0]}: command not found (is the Slurm client installed and on PATH?)"
            ) from None
        except PermissionError as exc:
            raise SchedulerMissing(f"{argv[0]}: cannot be run: {exc.strerror}") from exc
        except subprocess.TimeoutExpired:
            hint = " The job may or may not have been submitted: check squeue." if argv[0] == "sbatch" else ""
            raise SchedulerTimeout(f"{' '.join(argv)}: no answer from Slurm within {self.timeout:g} s.{hint}") from None
        if self.cluster is not None and _CLUSTER_HEADER.match(result.stdout):
            rows = _CLUSTER_HEADER.sub("", result.stdout, count=1)
            result = subprocess.CompletedProcess(result.args, result.returncode, rows, result.stderr)
        return result

    def _checked(
        self, argv: Sequence[str], what: str, job: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """_call, and a non-zero exit raised as the SchedulerError that Slurm's message maps to."""
        result = self._call(argv, env)
        if result.returncode != 0:
            raise _failure(what, job, result)
        return result

    # -- submit --

    @overload
    def sbatch(
        self,
        script: Path | str,
        extra_args: Sequence[str] = ...,
        *,
        parsable: bool = ...,
        test_only: Literal[False] = ...,
    ) -> Submitted: ...

    @overload
    def sbatch(
        self,
        script: Path | str,
        extra_args: Sequence[str] = ...,
        *,
        parsable: bool = ...,
        test_only: Literal[True],
    ) -> TestOnly: ...

    def sbatch(
        self,
        script: Path | str,
        extra_args: Sequence[str] = (),
        *,
        parsable: bool = True,
        test_only: bool = False,
    ) -> Submitted | TestOnly:
        """Submit ``script`` (or with test_only, ask when it would start without submitting).

        Runs in clean_submit_env(env) so that inherited SBATCH_*/SLURM_* cannot override the script.
        """
        argv = self.sbatch_argv(script, extra_args, parsable=parsable, test_only=test_only)
        env = clean_submit_env(os.environ if self._env is None else self._env)
        result = self._checked(argv, "sbatch", os.fspath(script), env)
        # --test-only reports on stderr and submits nothing.
        return parse_test_only(result.stderr) if test_only else parse_sbatch_output(result.stdout)

    @staticmethod
    def sbatch_argv(
        script: Path | str, extra_args: Sequence[str] = (), *, parsable: bool = True, test_only: bool = False
    ) -> list[str]:
        """The exact argv sbatch() runs (a dry run prints it)."""
        argv = ["sbatch", *(["--parsable"] if parsable else []), *(["--test-only"] if test_only else [])]
        return [*argv, *extra_args, os.fspath(script)]

    # -- look --

    def comments(self, name: str | None = None) -> list[tuple[JobId, str]]:
        """(job id, comment) of this user's jobs in every state Slurm still shows, optionally of one job name.

        How a submission whose sbatch timed out is found: it carries a unique token in its comment.
        """
        argv = ["squeue", "--me", "--noheader", "--states=all", f"--format={COMMENT_FORMAT}"]
        if name is not None:
            argv.append(f"--name={name}")
        return parse_comments(self._checked(argv, "squeue", "").stdout)

    def show_jobs(self, job: JobId | str | int | None = None) -> list[JobInfo]:
        """Every record `scontrol show job` has for ``job`` (an array job gives one per task), or all jobs."""
        return self._show_jobs(None if job is None else str(as_job_id(job).without_step()), str(job))

    def _show_jobs(self, target: str | None, asked: str) -> list[JobInfo]:
        """`scontrol show job` of ``target`` (a job id checked already, or None: every job); ``asked`` names it in
        an error."""
        argv = ["scontrol", "--oneliner", "show", "job"]
        if target is not None:
            argv.append(target)
        result = self._call(argv)
        if result.returncode != 0:
            error = _failure("scontrol show job", asked, result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return [job_info(rec) for rec in parse_show_job(result.stdout)]

    def show_job(self, job: JobId | str | int) -> JobInfo | None:
        """The record of one job, or None when Slurm does not know it ("Invalid job id specified")."""
        wanted = as_job_id(job).without_step()
        target = str(wanted)
        records = self._show_jobs(target, target)  # the id checked once, here
        for info in records:
            if info.job_id == wanted or (wanted.array_task is None and info.raw_id == wanted.job):
                return info
        return records[0] if len(records) == 1 else None

    def squeue(self, jobs: Iterable[JobId | str | int] = (), *, all_states: bool = False) -> list[QueueEntry]:
        """squeue rows for ``jobs`` (all jobs when empty); finished jobs too with ``all_states``."""
        argv = ["squeue", "--noheader", f"--format={SQUEUE_FORMAT}"]
        ids = [str(as_job_id(j).without_step()) for j in jobs]
        if ids:
            argv.append("--jobs=" + ",".join(ids))
        if all_states:
            argv.append("--states=all")
        result = self._call(argv)
        if result.returncode != 0:
            error = _failure("squeue", ",".join(ids), result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return parse_squeue(result.stdout)

    def array_tasks(self, jobs: Iterable[JobId | str | int]) -> list[TaskRow]:
        """Every task of these job arrays, finished ones included, in one squeue call (slurm.array_queue)."""
        from slurmgen.slurm import array_queue

        ids = sorted({str(as_job_id(j).without_step()) for j in jobs})
        result = self._call(array_queue.argv(ids))
        if result.returncode != 0:
            error = _failure("squeue", ",".join(ids), result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return array_queue.parse(result.stdout)

    def steps(self, job: JobId | str | int) -> list[StepRecord]:
        """The steps of one job (`scontrol --oneliner show step <job>`); [] when Slurm does not know the job."""
        target = str(as_job_id(job).without_step())
        result = self._call(["scontrol", "--oneliner", "show", "step", target])
        if result.returncode != 0:
            error = _failure("scontrol show step", target, result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return parse_steps(result.stdout)

    def show_hostnames(self, expression: str) -> list[str]:
        """Expand a hostlist expression with `scontrol show hostnames`.

        Always with an explicit argument: without one scontrol reads SLURM_NODELIST (src/scontrol/scontrol.c). An
        invalid hostlist is reported on stderr with exit status 0, so any stderr output is an error here.
        """
        expression = expression.strip()
        if not expression or expression.startswith("-") or any(c.isspace() for c in expression):
            raise UsageError(f"not a hostlist expression: {expression!r}")
        result = self._call(["scontrol", "show", "hostnames", expression])
        if result.returncode != 0 or result.stderr.strip():
            detail = result.stderr.strip() or f"exit {result.returncode}"
            raise SchedulerError(f"scontrol show hostnames {expression}: {detail}")
        return result.stdout.split()

    def show_config(self) -> str:
        """`scontrol show config`: the controller's configuration, as text (slurmgen.slurm.site parses it)."""
        return self._checked(["scontrol", "show", "config"], "scontrol show config", "").stdout

    def show_partitions(self, name: str | None = None) -> str:
        """`scontrol -o show partition [name]`: one line per partition (slurmgen.slurm.site parses it).

        An unknown name is a SchedulerError ("Partition x not found", exit 1)."""
        argv = ["scontrol", "-o", "show", "partition"]
        if name is not None:
            if not name or name.startswith("-") or any(c.isspace() or c == "," for c in name):
                raise UsageError(f"not a partition name: {name!r}")
            argv.append(name)
        return self._checked(argv, "scontrol show partition", "").stdout

    # -- act --

    def requeue(self, job: JobId | str | int, *, hold: bool = False, incomplete: bool = False) -> None:
        """`scontrol requeue` (or `requeuehold`) one job; an array task alone, never its whole array.

        ``incomplete`` acts only on a job that is running or suspended and is a no-op otherwise, so a second call while
        the job is pending is harmless (scontrol(1), requeue: Incomplete). Errors: RequeueDisabled (--no-requeue),
        JobPending (already pending), InvalidJobId.
        """
        target = as_job_id(job).requeue_target()
        command = "requeuehold" if hold else "requeue"
        argv = ["scontrol", command, *(["Incomplete"] if incomplete else []), target]
        self._checked(argv, f"scontrol {command}", target)

    def clear_requeue(self, job: JobId | str | int) -> None:
        """`scontrol update JobId=<job> Requeue=0`: the job is no longer requeued by Slurm (scontrol(1), Requeue=).
        An expedited job that exits non-zero would otherwise be requeued and held (src/slurmctld/job_mgr.c,
        `_set_job_requeue_exit_value` and `batch_requeue_fini`: "holding expedited requeue")."""
        target = as_job_id(job).requeue_target()
        self._checked(["scontrol", "update", f"JobId={target}", "Requeue=0"], "scontrol update", target)

    def release(self, job: JobId | str | int) -> None:
        """`scontrol release`: let a held job (requeuehold, sbatch -H) start."""
        target = as_job_id(job).requeue_target()
        self._checked(["scontrol", "release", target], "scontrol release", target)

    def cancel(
        self, job: JobId | str | int, *, signal: str | None = None, batch: bool = False, full: bool = False
    ) -> None:
        """`scancel`, or with ``signal`` deliver a signal. Who gets it (scancel(1)):
        plain: the srun steps' tasks only; ``batch``: the batch shell only; ``full``: all of them.
        """
        if batch and full:
            raise UsageError("scancel: --batch and --full exclude each other")
        argv = ["scancel"]
        if signal is not None:
            argv.append(f"--signal={require_signal_name(signal)}")
        argv += ["--batch"] if batch else []
        argv += ["--full"] if full else []
        argv.append(as_job_id(job).cancel_target())
        self._checked(argv, "scancel", str(job))
