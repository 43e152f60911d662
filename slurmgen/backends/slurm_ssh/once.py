"""The one remote call that submits over ssh (`slurmgen submit --cluster NAME`, slurmgen.backends.slurm_ssh.placing),
and `slurmgen resume` of a remote job that Slurm has forgotten through the same call.

Never submitted twice: the call holds a lock in the run's directory on the cluster (named by the submission's
token), answers the job id written there by an earlier try, else looks for a job whose comment carries the token
(an sbatch whose reply was lost with the connection), and only then runs sbatch. So when the connection drops
mid-submit, the same call is simply made again with the same token.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from slurmgen.backends.slurm_ssh.store_trust import REFUSED, SG_OWN, refuse
from slurmgen.errors import SchedulerError, UsageError
from slurmgen.journal import SLURM_CLUSTER, TOKEN_PREFIX, Entry, Journal
from slurmgen.remote.transport import Transport, TransportError
from slurmgen.slurm.ids import cluster_label
from slurmgen.slurm.parse import parse_sbatch_output
from slurmgen.spec.model import JobSpec
from slurmgen.submission.plan import comment_for

TRIES = 3  # a dropped connection is retried with the same token: the remote call is idempotent


# sbatch's answer is kept whole: `123;name` on a multi-cluster site (src/sbatch/sbatch.c), whose cluster every
# later command names. The token lookup asks the login node's own cluster only: a job that sbatch placed on another
# cluster and whose answer was lost before it reached the jobid file is not found there (docs/remote.md,
# "Multi-cluster sites").
# squeue's %i of an array is one of its tasks (123_4) or a pending range (123_[5-9]): the part before `_` is the
# array's job id (squeue(1) %i, "Job or job step id"; job_array.shtml).
# What the call writes is private whatever the login node's umask (often 022, which left the run directory 755 and
# job.sbatch, with the literal values of `env:`, 644): it works under umask 077 and makes the run directory 0700
# even where an older slurmgen made it. sbatch gets the login node's own umask back: the job's files are as a
# submit on the login node makes them (sbatch(1) SLURM_UMASK).
# The values of `from_env` variables follow the script's text on stdin, each ended by a NUL (no environment value
# holds one): read into shell variables that are never exported, then set in sbatch's environment alone, so no
# file and no command line on the cluster holds them (docs/security.md, "Secrets").
# The run's directory, the two above it (runs/<name>) and the log directories are checked (store_trust.SG_OWN)
# before and after they are made: the script and the job id written there are read back by resume and status.
_SUBMIT = """set -u
_sg_u=$(umask); umask 077
r={run}
for p in "$r" "${{r%/*}}" "${{r%/*/*}}" {log_dir} {ship}; do sg_own "$p" || exit 0; done
mkdir -p "$r" {log_dir} || exit 3; chmod 700 "$r" || exit 3
for p in "$r" "${{r%/*}}" "${{r%/*/*}}" {log_dir}; do sg_own "$p" || exit 0; done
cd "$r" || exit 3
exec 9>"$r/lock"; flock 9
if [ -s {jobid} ]; then cat {jobid}; exit 0; fi
j=$(squeue --me --noheader --format='%i %k' 2>/dev/null |
   awk -v t={marker} '$NF == t {{sub(/_.*/, "", $1); print $1; exit}}')
if [ -n "$j" ]; then echo "$j" > {jobid}; cat {jobid}; exit 0; fi
{read_secrets}cat > job.sbatch.tmp && mv job.sbatch.tmp job.sbatch || exit 3
( umask "$_sg_u"
  {secrets}PYTHONPATH={ship}${{PYTHONPATH:+:$PYTHONPATH}} sbatch --parsable {args} job.sbatch ) > {jobid}.tmp || exit 5
mv {jobid}.tmp {jobid} && cat {jobid}
"""


def once_script(
    run_dir: str,
    log_dir: str,
    shipped: str,
    spec: JobSpec | None,
    token: str,
    extra: tuple[str, ...] = (),
    jobid: str = "jobid",
    error_dir: str | None = None,
    secrets: tuple[str, ...] = (),
) -> str:
    """The one remote call that submits (see the module's docstring). ``spec`` None: a resubmission, whose comment
    is the token alone (the script keeps its own #SBATCH lines). ``jobid``: the file in the run directory that
    keeps the answer (each array of a sweep has its own; they share the run directory and script). ``error_dir``: the
    spec's error, created beside the log's directory (Slurm creates neither). ``secrets``: the names of the
    `from_env` variables whose values come on stdin before the script (secret_stdin), set in sbatch's environment
    only."""
    comment = comment_for(spec, token) if spec is not None else f"{TOKEN_PREFIX}{token}"
    args = shlex.join([f"--comment={comment}", *extra])
    return SG_OWN + _SUBMIT.format(
        run=shlex.quote(run_dir),
        log_dir=" ".join(shlex.quote(d) for d in (log_dir, error_dir) if d is not None),
        marker=shlex.quote(f"{TOKEN_PREFIX}{token}"),
        ship=shlex.quote(shipped),
        args=args,
        jobid=shlex.quote(jobid),
        read_secrets="".join(f"IFS= read -r -d '' _sg_s{i} || exit 3\n" for i in range(len(secrets))),
        secrets="".join(f'{name}="$_sg_s{i}" ' for i, name in enumerate(secrets)),
    )


def forwarded_names(env: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The variables of the submitting environment a job's `from_env` entries name, each once, in order."""
    from slurmgen.spec.secrets import forwarded

    return tuple(dict.fromkeys(source for _name, source in forwarded(env)))


def secret_stdin(names: tuple[str, ...], environ: Mapping[str, str]) -> bytes:
    """What once_script reads first from stdin: each variable's value, ended by a NUL. Every name must be set
    (spec.secrets.missing refuses first)."""
    return b"".join(environ[name].encode("utf-8", "surrogateescape") + b"\0" for name in names)


# What resume submits again: the script in the run's directory, read only when both are the user's own, not links,
# and not writable by group or others (another user's planted script would run as the user).
_READ_SCRIPT = """r={r}; f="$r/job.sbatch"
sg_own "$r" || exit 0
if [ -L "$f" ]; then sg_own "$f"; exit 0; fi
[ -e "$f" ] || exit 1
[ -f "$f" ] || {{ echo "{refused}$f is not a regular file: submit the spec again"; exit 0; }}
sg_own "$f" || exit 0
exec cat -- "$f"
"""

# The setup line version_setup wrote into the script: where the job's slurmgen was shipped.
_SHIPPED = re.compile(r"export PYTHONPATH=(\S+?)\$\{PYTHONPATH")
# The directive naming the `from_env` variables (script.directives, spec.secrets.export_option).
_EXPORT = re.compile(r"^#SBATCH --export='?ALL,([A-Za-z_][A-Za-z0-9_,]*)'?$", re.MULTILINE)


def _forwarded_in(script: str) -> tuple[str, ...]:
    """The `from_env` names a rendered script forwards (its `#SBATCH --export=ALL,...`). Pure."""
    found = _EXPORT.search(script)
    return tuple(name for name in found[1].split(",") if name) if found else ()


def resubmit_remote(
    transport: Transport,
    entry: Entry,
    resume_from: str,
    token: str,
    journal: Journal,
    clock: Callable[[], float],
    warn: Callable[[str], object] = lambda line: None,
    environ: Mapping[str, str] = os.environ,
) -> str:
    """`slurmgen resume` of a remote job that Slurm has forgotten: its script, as it ran (in its run directory on
    the cluster), submitted again with SLURMGEN_RESUME_FROM, through the same once-only remote call as a submit.
    The new job's id."""
    from slurmgen import contract

    got = transport.run(SG_OWN + _READ_SCRIPT.format(r=shlex.quote(entry.run_dir), refused=REFUSED))
    refuse(entry.cluster or transport.cluster, got.stdout.decode(errors="replace"))
    script = got.stdout
    if got.returncode != 0 or not script:
        raise UsageError(f"the script job {resume_from} ran is gone from cluster {entry.cluster} "
                         f"({entry.run_dir}/job.sbatch); submit the spec again")  # fmt: skip
    found = _SHIPPED.search(script.decode(errors="replace"))
    shipped = found[1].strip("'") if found else ""
    run_dir = posixpath.join(posixpath.dirname(entry.run_dir), token)
    # the command line's --export beats the script's (sbatch(1)); with ALL it still carries the `from_env` values
    extra = (f"--export=ALL,{contract.RESUME_FROM}={resume_from}",)
    names = _forwarded_in(script.decode(errors="replace"))
    absent = [name for name in names if name not in environ]
    if absent:
        raise UsageError(f"job {resume_from}: its script forwards {', '.join(absent)} (from_env), not set in this "
                         f"environment; export {' '.join(absent)} before resuming")  # fmt: skip

    base = dataclasses.replace(entry, event="submitting", token=token, run_dir=run_dir, script="job.sbatch",
                               time=clock(), job_id=None, extra={**entry.extra, "resumes": resume_from})  # fmt: skip
    command = once_script(run_dir, entry.log_dir or "", shipped, None, token, extra, secrets=names)
    sent = send_once(transport, command, secret_stdin(names, environ) + script, base, journal, clock, warn)
    return cluster_label(sent.cluster, sent.job_id)


class Sent(NamedTuple):
    job_id: str  # Slurm's id
    cluster: str | None  # the cluster sbatch named on a multi-cluster site


def send_once(
    transport: Transport,
    command: str,
    script: bytes,
    base: Entry,
    journal: Journal,
    clock: Callable[[], float],
    warn: Callable[[str], object],
) -> Sent:
    """Make the once-only submit call (once_script), recorded in the journal as ``base`` (submitting, then
    submitted or failed); a dropped connection is asked again with the same token. The job id, and its cluster on
    a multi-cluster site (in the entry's extra: its `cluster` is the profile's name)."""
    journal.append(base)
    for attempt in range(1, TRIES + 1):
        try:
            got = transport.run(command, script, timeout=120)
            break
        except TransportError as exc:
            if attempt == TRIES:
                raise
            warn(f"note: {exc}; asking again with the same submission token {base.token} (never a second job)")
    text = got.stdout.decode(errors="replace").strip()
    answer = _answer(text) if got.returncode == 0 else None
    if answer is None:
        try:
            refuse(base.cluster or transport.cluster, text)  # a run or log directory another user made first
        except UsageError:
            journal.append(dataclasses.replace(base, event="failed", time=clock()))
            raise
        said = (got.stderr.strip().splitlines() or [text or f"status {got.returncode}"])[-1]
        journal.append(dataclasses.replace(base, event="failed", time=clock()))
        raise SchedulerError(f"cluster {base.cluster}: sbatch refused the job: {said}")
    extra = base.extra if answer.cluster is None else {**base.extra, SLURM_CLUSTER: answer.cluster}
    journal.append(dataclasses.replace(base, event="submitted", time=clock(), job_id=answer.job_id, extra=extra))
    return answer


def _answer(text: str) -> Sent | None:
    """`123` or `123;name` (sbatch --parsable, as the jobid file keeps it); None for anything else."""
    try:
        submitted = parse_sbatch_output(text)
    except SchedulerError:
        return None
    return Sent(str(submitted.job_id), submitted.cluster)
