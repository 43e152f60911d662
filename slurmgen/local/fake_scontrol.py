"""The `scontrol` a local job finds first on PATH: `requeue`, `update ExcNodeList`, `show job`, `show step` and
`show hostnames`.

`scontrol requeue [Incomplete] <job>` leaves a request in the job's control directory; the runner sees it, ends the run
as Slurm does (SIGCONT and SIGTERM to every process, SIGKILL after KillWait) and starts the script again with
SLURM_RESTART_COUNT one higher. Answers follow Slurm's (src/slurmctld/job_mgr.c `_job_requeue_op`): a second request is
"Job is pending execution", or a silent no-op with Incomplete; a job submitted with --no-requeue gives "Requested
operation is presently disabled"; another job id gives "Invalid job id specified".

`scontrol show job <job>` prints the job's record as slurmctld would in the fields the runtime reads: RUNNING, or
COMPLETING with Restarts one higher once a requeue was asked for, COMPLETING with Reason=TimeLimit once the runner
ends the job at its time limit (the file ENDING: slurmctld's `_job_timed_out` in src/slurmctld/job_mgr.c sets
JOB_TIMEOUT | JOB_COMPLETING and FAIL_TIMEOUT, and scontrol names a job with the COMPLETING flag COMPLETING until
its processes are gone), COMPLETING once it cancels the job, and PreemptTime while the runner rehearses a
preemption (`--preempt-after`: the file PREEMPTED in the control directory). `scontrol show step <job>` lists the
batch step and the steps whose fake srun is running, with srun's pid (`SrunHost:Pid=`), as Slurm 22.05 does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence

from slurmgen.job_context.values import key_from
from slurmgen.local import jobenv

REQUEUE_REQUEST = "requeue"  # file names inside the control directory
NO_REQUEUE = "no-requeue"
PREEMPTED = "preempted"  # holds the preemption's time, as Slurm's PreemptTime
EXCLUDED = "excluded"  # the job's ExcNodeList (`scontrol update JobId=<job> ExcNodeList=...`), one line
ENDING = "ending"  # the runner is ending the job: its end state (TIMEOUT, CANCELLED), as slurmctld's record says
REASONS = {"TIMEOUT": "TimeLimit"}  # the Reason= slurmctld gives a job it ends that way (FAIL_TIMEOUT)


class ScontrolError(Exception):
    pass


def requeue_request_text(record: str) -> str:
    """A requeue request record (``job=2 incomplete=1 pid=9709 time=1795770211``) in words for a person:
    ``scontrol requeue Incomplete 2, from pid 9709 at 09:03:11``. The record itself stays as written."""
    fields = dict(word.partition("=")[::2] for word in record.split())
    words = (
        ["scontrol requeue"] + (["Incomplete"] if fields.get("incomplete") == "1" else []) + [fields.get("job", "?")]
    )
    when = fields.get("time", "")
    at = f" at {time.strftime('%H:%M:%S', time.localtime(int(when)))}" if when.isdigit() else ""
    return " ".join(words) + (f", from pid {fields['pid']}" if fields.get("pid") else "") + at


def names_this_job(job: str, env: Mapping[str, str]) -> bool:
    """Whether ``job`` is this job: its job id, or for an array task its `A_T` too, as scontrol(1) takes both
    ("<job_id>_<array_id>" for one array task). The batch shell and the runtime ask by the job key."""
    return job != "" and job in {env.get("SLURM_JOB_ID", ""), key_from(env) or ""}


def fake_requeue(args: Sequence[str], env: Mapping[str, str]) -> str:
    """Record a requeue request; returns what to print (nothing, like scontrol). Raises ScontrolError."""
    words = list(args)
    incomplete = bool(words) and words[0].lower() == "incomplete"
    if incomplete:
        words.pop(0)
    if len(words) != 1:
        raise ScontrolError("usage: scontrol requeue [Incomplete] <job_id>")
    job = words[0]
    control = env.get(jobenv.LOCAL_DIR, "")
    if not control or not names_this_job(job, env):
        raise ScontrolError(f"Invalid job id specified for job {job}")
    if os.path.exists(os.path.join(control, NO_REQUEUE)):
        raise ScontrolError(f"Requested operation is presently disabled for job {job}")
    line = f"job={job} incomplete={int(incomplete)} pid={os.getppid()} time={int(time.time())}\n"
    try:
        fd = os.open(os.path.join(control, REQUEUE_REQUEST), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if incomplete:
            return ""  # the job is no longer running: Incomplete makes this a successful no-op
        raise ScontrolError(f"Job is pending execution for job {job}") from None
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return ""


def show_job(args: Sequence[str], env: Mapping[str, str]) -> str:
    """This job's record, one line (`scontrol --oneliner show job`)."""
    job = args[0] if args else ""
    control = env.get(jobenv.LOCAL_DIR, "")
    if not control or not names_this_job(job, env):
        raise ScontrolError(f"slurm_load_jobs error: Invalid job id specified for job {job}")
    restarts = int(env.get("SLURM_RESTART_COUNT") or 0)
    requeued = os.path.exists(os.path.join(control, REQUEUE_REQUEST))
    try:
        with open(os.path.join(control, PREEMPTED), encoding="utf-8") as handle:
            preempt_time = handle.read().strip() or "None"
    except OSError:
        preempt_time = "None"
    try:
        with open(os.path.join(control, ENDING), encoding="utf-8") as handle:
            ending = handle.read().strip()
    except OSError:
        ending = ""
    fields = {
        "JobId": env.get("SLURM_JOB_ID", job),  # an array task's own id; ArrayJobId/ArrayTaskId name its key
        **_array_fields(env),
        "JobName": env.get("SLURM_JOB_NAME", "local"),
        "JobState": "COMPLETING" if requeued or ending else "RUNNING",
        "Reason": REASONS.get(ending, "None"),
        "Requeue": "0" if os.path.exists(os.path.join(control, NO_REQUEUE)) else "1",
        "Restarts": str(restarts + 1 if requeued else restarts),
        "ExitCode": "0:0",
        "PreemptTime": preempt_time,
        "Partition": env.get("SLURM_JOB_PARTITION", jobenv.PARTITION),
        "NodeList": env.get("SLURM_JOB_NODELIST", ""),
        "ExcNodeList": _read_excluded(control) or "(null)",
    }
    return " ".join(f"{k}={v}" for k, v in fields.items()) + "\n"


def _array_fields(env: Mapping[str, str]) -> dict[str, str]:
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    return {"ArrayJobId": array_job, "ArrayTaskId": task} if array_job and task else {}


def _read_excluded(control: str) -> str:
    try:
        with open(os.path.join(control, EXCLUDED), encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def update_job(args: Sequence[str], env: Mapping[str, str]) -> str:
    """`scontrol update JobId=<job> ExcNodeList=<nodes>`: taken only while the job is pending, as Slurm does
    (src/slurmctld/job_mgr.c: ESLURM_JOB_NOT_PENDING); here, once a requeue was asked for. The runner gives the
    next run nodes outside the list."""
    pairs = dict(w.partition("=")[::2] for w in args)
    job, nodes = pairs.get("JobId", pairs.get("jobid", "")), pairs.get("ExcNodeList")
    control = env.get(jobenv.LOCAL_DIR, "")
    if nodes is None or set(pairs) - {"JobId", "jobid", "ExcNodeList"}:
        raise ScontrolError("only `scontrol update JobId=<job> ExcNodeList=<nodes>` is emulated locally")
    if not control or not names_this_job(job, env):
        raise ScontrolError(f"Invalid job id specified for job {job}")
    if not os.path.exists(os.path.join(control, REQUEUE_REQUEST)):
        raise ScontrolError(f"Job is no longer pending execution for job {job}")
    with open(os.path.join(control, EXCLUDED), "w", encoding="utf-8") as handle:
        handle.write(nodes + "\n")
    return ""


def running_steps(control: str) -> list[tuple[int, int]]:
    """(step id, srun pid) of the steps whose fake srun is alive (fake_srun.register_step)."""
    found: list[tuple[int, int]] = []
    try:
        names = os.listdir(control)
    except OSError:
        return found
    for name in sorted(names):
        number = name.removeprefix("step-").removesuffix(".pid")
        if not (name.startswith("step-") and name.endswith(".pid") and number.isdigit()):
            continue
        try:
            with open(os.path.join(control, name), encoding="ascii") as handle:
                pid = int(handle.read().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            continue
        found.append((int(number), pid))
    return found


def show_step(args: Sequence[str], env: Mapping[str, str]) -> str:
    """This job's running steps as `scontrol --oneliner show step` prints them (the fields slurmgen reads)."""
    job = args[0] if args else ""
    control = env.get(jobenv.LOCAL_DIR, "")
    if not control or not names_this_job(job, env):
        raise ScontrolError("slurm_get_job_steps error: Invalid job id specified")
    host = jobenv.node_names(1)[0]
    lines = [f"StepId={job}.batch State=RUNNING SrunHost:Pid=(null):0"]
    lines += [f"StepId={job}.{step} State=RUNNING SrunHost:Pid={host}:{pid}" for step, pid in running_steps(control)]
    return "".join(line + "\n" for line in lines)


def show_hostnames(args: Sequence[str], env: Mapping[str, str]) -> str:
    from slurmgen.slurm.hostlist import HostlistError, expand_hostlist

    expr = args[0] if args else env.get("SLURM_JOB_NODELIST", "")
    try:
        return "".join(host + "\n" for host in expand_hostlist(expr))
    except HostlistError:
        raise ScontrolError("Invalid hostlist: " + expr) from None


def run(argv: Sequence[str], env: Mapping[str, str]) -> str:
    words = [w for w in argv if w not in ("-o", "--oneliner")]
    if words[:1] == ["requeue"]:
        return fake_requeue(words[1:], env)
    if words[:1] == ["update"]:
        return update_job(words[1:], env)
    if [w.lower() for w in words[:2]] == ["show", "hostnames"] and len(words) <= 3:
        return show_hostnames(words[2:], env)
    if [w.lower() for w in words[:2]] == ["show", "job"] and len(words) == 3:
        return show_job(words[2:], env)
    if [w.lower() for w in words[:2]] == ["show", "step"] and len(words) == 3:
        return show_step(words[2:], env)
    raise ScontrolError(
        f"`scontrol {' '.join(argv)}` is not emulated locally (only `requeue [Incomplete] <job>`, `update "
        "ExcNodeList`, `show job`, `show step` and `show hostnames`); run it on a cluster"
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        sys.stdout.write(run(sys.argv[1:] if argv is None else argv, os.environ))
    except ScontrolError as exc:
        print(f"scontrol: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
