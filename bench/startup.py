"""What slurmgen adds to a job's start-up: from the batch shell's start to rank 0's state loaded, against a bare
`srun python3 prog.py` of the same program, part by part.

    python bench/startup.py [--reps 5] [--nodes 1] [--tasks-per-node 2]

Both launches run on this machine under the local emulator (slurmgen/local/: the fake srun that `slurmgen run`
puts on PATH, the batch environment it gives a job), as a requeued job's second run (SLURM_RESTART_COUNT=1), with
the state a priming run saved (bench/startup_prog.py, about 1 MiB):

- bare: a batch script whose only line is `srun ... python3 bench/startup_prog.py`; the program sets RANK,
  WORLD_SIZE and LOCAL_RANK from Slurm's, runs init_process_group("gloo", env://) and torch.load's the state;
- slurmgen: the script `slurmgen render` makes for the same program (traced with bash's xtrace, timestamps from
  EPOCHREALTIME), whose tasks run init_distributed, Preemption() and load().

Parts (medians over --reps, the two launches interleaved; the machine may be shared, so the load average is
printed): the batch helpers before the step (each `python3 -m slurmgen.batch ...` / `slurmgen.task
--rendezvous` the script runs before srun, and the rest of the shell), srun to the program's interpreter (the
supervisor, and its start-up hook), the program's `import torch`, the runtime's import, the c10d store, the start
barrier, the process group, Preemption() and load(). "added" is slurmgen's total minus bare's. Python processes
per rank: the processes between srun and the program, the program included; per node: the batch helpers started
before the step (the preemption watcher among them, which runs beside the step). Then the CPU of each piece run
alone (--cpu-reps): on a busy node, start-up wall time follows the CPU spent before the program's first step,
and those numbers move little with the machine's load. Results under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurmgen.local import jobenv, setup  # noqa: E402
from slurmgen.local.runner import LocalJob, Runner  # noqa: E402

PROGRAM = ROOT / "bench" / "startup_prog.py"
JOB_ID = "4242"
TRACE_FD = 9
# After the #SBATCH lines: every command the shell runs, with the time it started, into this run's trace file.
TRACING = (
    f'exec {TRACE_FD}>>"$BENCH_STARTUP_TRACE-${{SLURM_RESTART_COUNT:-0}}"; '
    f"BASH_XTRACEFD={TRACE_FD}; PS4='+${{EPOCHREALTIME}} '; set -x\n"
)
SPEC = """\
name: startup
command: [python3, {program}]
time: "00:10:00"
nodes: {nodes}
tasks_per_node: {tasks}
cpus_per_task: 1
distributed:
  backend: gloo
  timeout: 60
  barrier_timeout: 30
preemption:
  lead_time: 120
  max_requeues: 3
output: logs
"""
# What the trace shows of each helper the script starts before the step.
HELPERS = {
    "batch begin": re.compile(r"slurmgen\.batch'? '?begin"),
    "batch watch": re.compile(r"slurmgen\.batch'? '?watch"),
    "rendezvous": re.compile(r"slurmgen\.task'? '?--rendezvous"),
}
PARTS = (
    ("shell before the step", "shell"),
    ("  of it: batch begin", "batch begin"),
    ("  of it: rendezvous", "rendezvous"),
    ("srun to the program", "to_program"),
    ("  of it: supervisor + hook", "supervisor"),
    ("program's import torch", "torch"),
    ("runtime import", "runtime_import"),
    ("prepare + c10d store", "store"),
    ("start barrier", "barrier"),
    ("process group", "pg"),
    ("Preemption()", "preemption"),
    ("load()", "load"),
    ("total: start to rank 0 loaded", "total"),
)


def traced(script: str) -> str:
    """The script with bash's xtrace on from its first command (after the #SBATCH lines, which sbatch reads)."""
    lines = script.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return "".join(lines[:first]) + TRACING + "".join(lines[first:])


def bare_script(nodes: int, tasks: int, cluster: bool) -> str:
    """`srun python3 prog.py`, and on a real cluster the lines a bare script needs for torch's env://."""
    head = f"#!/bin/bash\n#SBATCH --nodes={nodes} --ntasks-per-node={tasks} --cpus-per-task=1 --time=10\n"
    head += "#SBATCH --requeue --open-mode=append --output=bare-%j.log\n"
    rdzv = ""
    if cluster:
        rdzv = ('MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"\n'
                'export MASTER_ADDR MASTER_PORT=$((20000 + SLURM_JOB_ID % 5000))\n')  # fmt: skip
    return head + rdzv + f"srun --nodes={nodes} --ntasks-per-node={tasks} --cpus-per-task=1 python3 {PROGRAM}\n"


class Job:
    """One job in a scratch directory: slurmgen's rendered script and the bare one, run in the local emulator (its
    batch environment and fake srun) or submitted to a real cluster."""

    def __init__(self, work: Path, nodes: int, tasks: int, cluster: bool) -> None:
        self.work, self.nodes, self.tasks, self.cluster = work, nodes, tasks, cluster
        source = work / "startup.yaml"
        source.write_text(SPEC.format(program=PROGRAM, nodes=nodes, tasks=tasks), encoding="utf-8")
        loaded = setup.load(source, setup.Options(), gpus=[], submit_dir=work)
        paths = setup.paths(loaded.spec, JOB_ID, work / ".slurmgen", work)
        shape = jobenv.JobShape(JOB_ID, "startup", nodes, tasks, 1, str(work), socket.gethostname())
        self.runner = Runner(LocalJob(loaded.spec, loaded.script, paths, shape), self.base_env(), print,
                             python=sys.executable)  # fmt: skip
        if not cluster:
            self.runner.prepare()
        (work / "slurmgen.sbatch").write_text(traced(loaded.script), encoding="utf-8")
        (work / "bare.sbatch").write_text(traced(bare_script(nodes, tasks, cluster)), encoding="utf-8")
        self.port = 29000 + os.getpid() % 1000
        self.state = work / "bare.state"

    @staticmethod
    def base_env() -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # python3: this venv's
        return env

    def run(self, variant: str, mode: str, restart: int) -> dict[str, Any]:
        out = self.work / f"out-{variant}-{time.monotonic_ns()}"
        out.mkdir()
        env = self.base_env() if self.cluster else self.runner.env(restart)
        env.update(BENCH_STARTUP_OUT=str(out), BENCH_STARTUP_MODE=mode, BENCH_STARTUP_TRACE=str(out / "trace"))
        env.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore", BENCH_STARTUP_STATE=str(self.state))
        script = self.work / f"{variant}.sbatch"
        if self.cluster:
            env["BENCH_STARTUP_STATE"] = str(out / "bare.state")
            env["BENCH_STARTUP_PRIME"] = "1"
            self.submit(script, env)
            restart = 1
        else:
            if mode != "save":  # a completed job's end removed its state: the priming run's copy goes back
                shutil.copyfile(f"{self.state}.slurmgen", self.work / "logs" / "state" / f"{JOB_ID}.state")
            if variant == "bare":
                self.port += 1
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port))
            done = subprocess.run(["bash", str(script)], cwd=self.work, env=env, capture_output=True, text=True,
                                  timeout=300)  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"{variant} run failed ({done.returncode}):\n{done.stderr[-3000:]}\n{self.logs()}")
        ranks = [json.loads(p.read_text()) for p in sorted(out.glob(f"rank*-run{restart}.json"))]
        if len(ranks) != self.nodes * self.tasks:
            raise SystemExit(f"{variant}: {len(ranks)} ranks reported\n{self.logs()}")
        trace = (out / f"trace-{restart}").read_text().splitlines()
        return {"started": trace_times(trace)[0][0], "ranks": ranks, "trace": trace}

    def submit(self, script: Path, env: dict[str, str]) -> None:
        """sbatch, then wait for the job's second run (the first saves and requeues) to end."""
        (self.work / "logs").mkdir(exist_ok=True)  # Slurm opens the batch log there (as `slurmgen submit` makes it)
        done = subprocess.run(["sbatch", "--parsable", str(script)], cwd=self.work, env=env, capture_output=True,
                              text=True, check=True)  # fmt: skip
        job = done.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout
            fields = dict(word.split("=", 1) for word in shown.split() if "=" in word)
            if fields.get("JobState") in ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"):
                if fields.get("Restarts", "0") != "0":
                    return
                raise SystemExit(f"job {job} ended {fields['JobState']} in its first run\n{self.logs()}")
            time.sleep(0.5)
        subprocess.run(["scancel", job])
        raise SystemExit(f"job {job} did not finish its second run in time\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(p.read_text()[-2000:] for p in [*self.work.glob("logs/**/*.log"), *self.work.glob("*.log")])


def trace_times(lines: list[str]) -> list[tuple[float, str]]:
    """(when, command) of each command the top-level shell ran (one `+`), and of command substitutions (`++`)."""
    found = []
    for line in lines:
        match = re.match(r"(\++)([0-9.]+) (.*)", line)
        if match:
            found.append((float(match.group(2)), f"{match.group(1)} {match.group(3)}"))
    return found


def parts(run: dict[str, Any]) -> dict[str, float]:
    """Seconds per part of one run (rank 0's marks; the helpers from the shell's trace)."""
    events = trace_times(run["trace"])
    srun_at = next(t for t, cmd in events if re.search(r"^\+ '?srun", cmd))
    rank0 = next(r for r in run["ranks"] if r["rank"] == 0)
    marks = rank0["marks"]
    chain = rank0["chain"]  # the program first, then its parents up to srun
    task_start = chain[-1]["start"]
    got = {
        "shell": srun_at - run["started"],
        "to_program": marks["first_line"] - srun_at,
        "supervisor": chain[0]["start"] - task_start,  # the program's fork after the task's own start
        "torch": marks["torch"] - marks["first_line"],
        "total": marks["loaded"] - run["started"],
    }
    for name, pattern in HELPERS.items():
        for i, (when, cmd) in enumerate(events):
            if pattern.search(cmd) and not cmd.rstrip().endswith("&"):
                got[name] = events[i + 1][0] - when if i + 1 < len(events) else 0.0
                break
    if "store" in marks:
        got["runtime_import"] = marks["runtime_import"] - marks["torch"]
        got["store"] = marks["store"] - marks["init_start"]
        got["barrier"] = marks["barrier"] - marks["store"]
        got["pg"] = marks["pg"] - marks["barrier"]
        got["preemption"] = marks["preemption"] - marks["pg"]
        got["load"] = marks["loaded"] - marks["preemption"]
    else:
        got["pg"] = marks["pg"] - marks["torch"]
        got["load"] = marks["loaded"] - marks["pg"]
    return got


def processes(run: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(Python processes per rank, batch helpers per node before the step, the helpers' names)."""
    rank0 = next(r for r in run["ranks"] if r["rank"] == 0)
    per_rank = sum(1 for p in rank0["chain"] if "python" in os.path.basename(p["argv"][0] if p["argv"] else ""))
    srun_at = next(t for t, cmd in trace_times(run["trace"]) if re.search(r"^\+ '?srun", cmd))
    helpers = []
    for when, cmd in trace_times(run["trace"]):
        if when < srun_at:
            helpers += [name for name, pattern in HELPERS.items() if pattern.search(cmd)]
    return per_rank, len(helpers), helpers


def cpu_ms(argv: list[str], env: dict[str, str], cwd: Path, reps: int) -> float:
    """Median CPU (user + system, the process and what it waited for) of one command run alone, in ms."""
    used = []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(used) * 1000


def cpu_table(job: Job, reps: int) -> dict[str, float]:
    """What each of slurmgen's pieces costs in CPU, alone: on a busy node (four ranks importing torch on two cores,
    other jobs) start-up wall time follows CPU, while these numbers barely move with the load."""
    env = job.runner.env(1)
    env.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    py = sys.executable
    runtime = "import torch.distributed; import slurmgen.runtime.dist; from slurmgen.runtime import Preemption"
    pieces = {
        "python3 -c pass": [py, "-c", "pass"],
        "batch begin": [py, "-m", "slurmgen.batch", "begin"],
        "batch watch": [py, "-m", "slurmgen.batch", "watch", str(os.getpid()), "USR1"],
        "task --rendezvous": [py, "-m", "slurmgen.task", "--rendezvous"],
        "supervisor (-- /bin/true)": [py, "-m", "slurmgen.task", "--", "/bin/true"],
        "import torch": [py, "-c", "import torch.distributed"],
        "import torch + runtime": [py, "-c", runtime],
    }
    return {name: cpu_ms(argv, env, job.work, reps) for name, argv in pieces.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--tasks-per-node", type=int, default=2)
    parser.add_argument("--cluster", action="store_true", help="submit to the real Slurm cluster (SLURM_CONF)")
    parser.add_argument("--cpu-reps", type=int, default=15, help="runs of each piece for the CPU table (0: none)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    # /tmp: the real cluster's nodes (network namespaces) share this machine's file system.
    work = Path(tempfile.mkdtemp(prefix="slurmgen-startup-", dir="/tmp"))
    try:
        job = Job(work, args.nodes, args.tasks_per_node, args.cluster)
        if not args.cluster:
            job.run("slurmgen", "save", restart=0)  # the state the timed runs load
        runs: dict[str, list[dict[str, Any]]] = {"bare": [], "slurmgen": []}
        for _ in range(args.reps):
            for variant in runs:
                runs[variant].append(job.run(variant, variant, restart=1))
        assert all(r["loaded_state"] for v in runs.values() for run in v for r in run["ranks"]), "no state loaded"
        table = {v: [parts(run) for run in rs] for v, rs in runs.items()}
        med = {v: {k: statistics.median(p.get(k, 0.0) for p in ps) for k in ps[0]} for v, ps in table.items()}
        size = f"{args.nodes}x{args.tasks_per_node}"
        where = "the real cluster" if args.cluster else "the local emulator"
        print(f"start-up of a requeued run, {size} gloo on {where}, median of {args.reps} (seconds)")
        print(f"{'part':<32}{'bare':>8}{'slurmgen':>10}")
        for label, key in PARTS:
            cells = [med[v].get(key) for v in ("bare", "slurmgen")]
            bare, ours = ("" if c is None else f"{c:.3f}" for c in cells)
            print(f"{label:<32}{bare:>8}{ours:>10}")
        added = med["slurmgen"]["total"] - med["bare"]["total"]
        print(f"{'added by slurmgen':<32}{'':>8}{added:10.3f}")
        for variant in runs:
            per_rank, helpers, names = processes(runs[variant][0])
            print(f"python processes, {variant}: {per_rank} per rank, {helpers} batch helper(s) per node before the "
                  f"step ({', '.join(names) or 'none'})")  # fmt: skip
        print(f"load average: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        cpu = {} if args.cpu_reps == 0 else cpu_table(job, args.cpu_reps)
        if cpu:
            print(f"CPU of each piece alone, median of {args.cpu_reps} (ms; batch begin with the local emulator's "
                  "scontrol):")  # fmt: skip
            for piece, ms in cpu.items():
                print(f"  {piece:<30}{ms:8.1f}")
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        name = results / f"startup-{size}-{time.strftime('%Y%m%d-%H%M%S')}.json"
        saved = {"median": med, "runs": table, "added": added, "cpu_ms": cpu}
        name.write_text(json.dumps(saved, indent=1), encoding="utf-8")
        print(f"results: {name.relative_to(ROOT)}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
