#!/usr/bin/env python3
"""Measure what a real Slurm preemption does to a job, on a running test cluster (tests/cluster/up.sh).

    tests/cluster/preempt-facts.py --slurm 24.11 [--instance K] [--case NAME ...] [--json FILE]

Each case submits a *victim* to one of the low-* partitions (node1, both CPUs, --requeue) whose batch shell and
two srun tasks trap and log every signal with a timestamp and keep running, then a *preemptor* to `high` on the
same node, and polls `scontrol show job` every 0.2 s. It prints, relative to the preemptor's submission: the
signals that reached the batch shell and the tasks, every change of JobState/Reason/Restarts/PreemptTime/
EndTime, when the preemptor started, the banner slurmstepd wrote, and what the job ended as. Cases named
`*-requeue*` also run `scontrol requeue [Incomplete]` at a chosen moment and report its answer and effect.
The results are the tables in tests/cluster/README.md ("Preemption"). Takes 5-10 minutes for all cases
(grace expiry waits for slurmctld's 30 s time-limit check).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    name: str
    partition: str
    user_signal: bool
    signal: str = "B:USR1"  # the victim's --signal (no @: Slurm's default lead, never reached in 10 min)
    action: str = ""  # "requeue" or "requeue Incomplete": run during the grace / while COMPLETING
    action_when: str = ""  # "grace": RUNNING with PreemptTime set; "completing": JobState COMPLETING


CASES = [
    Case("requeue-g0", "low-requeue", False),
    Case("requeue-g0-usersig", "low-requeue", True),
    Case("requeue-grace", "low-requeue-grace", False),
    Case("requeue-grace-usersig", "low-requeue-grace", True),
    Case("requeue-grace-usersig-tasks", "low-requeue-grace", True, signal="USR1"),
    Case("cancel-g0", "low-cancel", False),
    Case("cancel-g0-usersig", "low-cancel", True),
    Case("cancel-grace", "low-cancel-grace", False),
    Case("cancel-grace-usersig", "low-cancel-grace", True),
    Case("requeue-grace-then-requeue", "low-requeue-grace", False, action="requeue", action_when="grace"),
    Case("requeue-grace-then-requeue-incomplete", "low-requeue-grace", False, "B:USR1", "requeue Incomplete", "grace"),
    Case("cancel-grace-then-requeue", "low-cancel-grace", False, action="requeue", action_when="grace"),
    Case("cancel-grace-then-requeue-incomplete", "low-cancel-grace", False, "B:USR1", "requeue Incomplete", "grace"),
    Case("cancel-g0-completing-then-requeue", "low-cancel", False, action="requeue", action_when="completing"),
    Case(
        "cancel-g0-completing-then-requeue-incomplete",
        "low-cancel",
        False,
        "B:USR1",
        "requeue Incomplete",
        "completing",
    ),
]

VICTIM = r"""#!/bin/bash
# $EPOCHREALTIME, not $(date): Slurm signals the whole process group, and a command substitution's child
# (whose traps are reset) would die of the signal and lose the line.
log() { echo "$EPOCHREALTIME $*" >>"$EVENTS"; }
for s in TERM USR1 USR2 CONT INT HUP; do trap "log batch got $s" "$s"; done
log batch start restart=${SLURM_RESTART_COUNT:-0}
srun --ntasks=2 bash -c '
  log() { echo "$EPOCHREALTIME $*" >>"$EVENTS"; }
  for s in TERM USR1 USR2 CONT INT HUP; do trap "log task $SLURM_PROCID got $s" "$s"; done
  log task $SLURM_PROCID start
  while :; do sleep 1 & wait $!; done' &
step=$!
while kill -0 "$step" 2>/dev/null; do wait "$step"; done
log batch step-ended
while :; do sleep 1 & wait $!; done
"""


@dataclass
class Result:
    case: Case
    events: list[str] = field(default_factory=list)  # "+12.34 batch got TERM"
    states: list[str] = field(default_factory=list)  # "+0.41 RUNNING Reason=None Restarts=0 PreemptTime=..."
    preemptor_started: float | None = None
    action_answer: str = ""
    banner: list[str] = field(default_factory=list)
    final: str = ""


class Cluster:
    def __init__(self, version: str, instance: int) -> None:
        self.select = ["--slurm", version, "--instance", str(instance)]
        info = subprocess.run(["bash", str(HERE / "up.sh"), *self.select, "--info"], capture_output=True, text=True)
        self.info = dict(line.split("=", 1) for line in info.stdout.splitlines() if "=" in line)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
        self.env["SLURM_CONF"] = self.info["SLURM_CONF"]
        if self.info["PATH_PREPEND"]:
            self.env["PATH"] = f"{self.info['PATH_PREPEND']}:{self.env['PATH']}"

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=60)

    def user_signal(self, on: bool) -> None:
        script = HERE / "preempt-signal.sh"
        subprocess.run(["bash", str(script), *self.select, "on" if on else "off"], check=True, capture_output=True)

    def show(self, job: str) -> dict[str, str]:
        out = self.run("scontrol", "show", "job", "-o", job).stdout
        # Enough for the keys read here, none of which holds spaces.
        first = out.splitlines()[0] if out.strip() else ""
        return {m.group(1): m.group(2) for m in re.finditer(r"(\w+)=(\S*)", first)}


def run_case(cluster: Cluster, case: Case, work: Path) -> Result:
    result = Result(case)
    cluster.user_signal(case.user_signal)
    events = work / f"{case.name}.events"
    out = work / f"{case.name}.out"
    script = work / "victim.sh"
    script.write_text(VICTIM)
    env_events = f"ALL,EVENTS={events}"
    victim_args = ["-p", case.partition, "-w", "node1", "-n2", "--requeue", "--time=10", f"--signal={case.signal}"]
    victim_args += ["-J", case.name, "-o", str(out), f"--export={env_events}", "--open-mode=append", str(script)]
    victim = cluster.run("sbatch", "--parsable", *victim_args).stdout.strip()
    deadline = time.monotonic() + 30
    while events.read_text().count(" start") < 3 if events.exists() else True:
        assert time.monotonic() < deadline, f"{case.name}: victim {victim} did not start"
        time.sleep(0.1)
    t0 = time.time()
    preemptor_args = ["-p", "high", "-w", "node1", "-n2", "-J", "preemptor", "-o", "/dev/null", "--wrap", "sleep 3"]
    preemptor = cluster.run("sbatch", "--parsable", *preemptor_args).stdout.strip()
    last = ""
    acted = False
    end = time.monotonic() + 150
    while time.monotonic() < end:
        rec = cluster.show(victim)
        keys = ("JobState", "Reason", "Restarts", "PreemptTime", "EndTime")
        now = " ".join(f"{k}={rec.get(k, '?')}" for k in keys)
        if now != last:
            result.states.append(f"+{time.time() - t0:6.2f} {now}")
            last = now
        if result.preemptor_started is None and cluster.show(preemptor).get("JobState") in {"RUNNING", "COMPLETED"}:
            result.preemptor_started = round(time.time() - t0, 2)
        in_grace = rec.get("JobState") == "RUNNING" and rec.get("PreemptTime") not in {None, "None"}
        completing = rec.get("JobState") == "COMPLETING"
        if (
            case.action
            and not acted
            and ((case.action_when == "grace" and in_grace) or (case.action_when == "completing" and completing))
        ):
            time.sleep(0.5 if case.action_when == "grace" else 0)
            answer = cluster.run("scontrol", *case.action.split(), victim)
            acted = True
            result.action_answer = (
                f"+{time.time() - t0:.2f} rc={answer.returncode} {(answer.stdout + answer.stderr).strip()!r}"
            )
        text = events.read_text() if events.exists() else ""
        restarted = "restart=1" in text
        if restarted and rec.get("JobState") == "RUNNING":
            time.sleep(1)
            result.final = f"requeued and started again (Restarts={cluster.show(victim).get('Restarts')})"
            break
        if rec.get("JobState") in {"PREEMPTED", "CANCELLED", "FAILED", "COMPLETED", "TIMEOUT"}:
            time.sleep(8)  # a requeue (or not) shows within cred_expire + 1 s
            rec = cluster.show(victim)
            if rec.get("JobState") in {"PREEMPTED", "CANCELLED", "FAILED", "COMPLETED", "TIMEOUT"}:
                result.final = f"{rec.get('JobState')} ExitCode={rec.get('ExitCode')} Restarts={rec.get('Restarts')}"
                break
        time.sleep(0.2)
    else:
        result.final = f"still {cluster.show(victim).get('JobState')} after 150 s"
    cluster.run("scancel", victim, preemptor)
    for line in (events.read_text() if events.exists() else "").splitlines():
        stamp, _, what = line.partition(" ")
        try:
            result.events.append(f"+{float(stamp) - t0:6.2f} {what}")
        except ValueError:
            result.events.append(f"?? {line!r}")
    result.banner = [line for line in (out.read_text() if out.exists() else "").splitlines() if "***" in line]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slurm", default="22.05")
    parser.add_argument("--instance", type=int, default=0)
    parser.add_argument("--case", action="append", help="run only these cases (default: all)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    cluster = Cluster(args.slurm, args.instance)
    cases = [c for c in CASES if not args.case or c.name in args.case]
    results = []
    with tempfile.TemporaryDirectory(prefix="preempt-facts-", dir="/tmp", ignore_cleanup_errors=True) as tmp:
        try:
            for case in cases:
                result = run_case(cluster, case, Path(tmp))
                results.append(result)
                print(
                    f"== {case.name}: {case.partition} user_signal={case.user_signal} --signal={case.signal}"
                    f"{' then scontrol ' + case.action + ' while ' + case.action_when if case.action else ''}"
                )
                for line in result.events:
                    print(f"   event {line}")
                for line in result.states:
                    print(f"   state {line}")
                print(f"   preemptor started: +{result.preemptor_started}")
                if result.action_answer:
                    print(f"   action: {result.action_answer}")
                for line in result.banner:
                    print(f"   banner: {line}")
                print(f"   final: {result.final}", flush=True)
        finally:
            cluster.user_signal(False)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
