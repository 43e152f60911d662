"""Submitting and asking over ssh, all over the same master connection: `slurmgen submit --cluster` the first time
(the snapshot and slurmgen's own modules uploaded) and unchanged (nothing uploaded), against the floor `ssh HOST
sbatch` plus rendering the spec here; and the state of 100 jobs in one round trip against one `ssh HOST squeue`.

    source /tmp/slurmgen-cluster/env.sh && python bench/remote.py [--runs 5]

Starts its own login node (the tests' sshd, tests/ssh_server.py) in front of the test cluster (tests/cluster/up.sh),
submits held jobs (they never take a node) and cancels them at the end. Goal: the unchanged submit within 1.5x
the floor. Prints a table of medians.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from ssh_server import start_sshd  # noqa: E402

from slurmgen.backends.slurm_ssh.remote_status import remote_states  # noqa: E402
from slurmgen.remote.transport import SshTransport  # noqa: E402


def timed(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if "SLURM_CONF" not in os.environ:
        sys.exit("source the test cluster's env.sh first (tests/cluster/README.md)")
    slurm_bin = os.environ["PATH"].split(":")[0]
    server = start_sshd(path_prepend=slurm_bin, exports={"SLURM_CONF": os.environ["SLURM_CONF"]})
    env = {
        **os.environ,
        "SLURMGEN_SSH_CONFIG": str(server.config),
        "SLURMGEN_SSH_DIR": str(server.root / "c"),
        "XDG_CONFIG_HOME": str(server.root / "no-config"),
        "SLURMGEN_HOME": str(server.root / "journal"),
    }
    t = SshTransport("bench", server.alias, persist=300, ssh=("ssh", "-F", str(server.config)), environ=env)
    jobs: list[str] = []
    try:
        repo = Path(tempfile.mkdtemp(prefix="proj-", dir=server.root))
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "train.py").write_text("print('bench')\n")
        (repo / "job.yaml").write_text('name: bench-remote\ncommand: [python3, train.py]\ntime: "5:00"\n'
                                       "sbatch:\n  hold: true\n")  # fmt: skip
        (repo / "clusters.yaml").write_text(f"bench:\n  host: {server.alias}\n  workdir: {server.root / 'work'}\n")
        t.run("true")  # the master opens once, outside every timing

        def submit() -> None:
            done = subprocess.run(
                [sys.executable, "-m", "slurmgen", "submit", "--cluster", "bench", "job.yaml"],
                cwd=repo, env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                sys.exit(f"submit failed: {done.stderr}")
            jobs.append(done.stdout.strip())

        def render() -> None:
            subprocess.run([sys.executable, "-m", "slurmgen", "render", "job.yaml"], cwd=repo, env=env,
                           capture_output=True, check=True)  # fmt: skip

        def floor() -> None:
            render()
            got = t.run("sbatch --parsable --hold --wrap true")
            jobs.append(got.stdout.decode().strip())

        first = timed(submit, 1)
        unchanged = timed(submit, args.runs)
        floor_ms = timed(floor, args.runs)
        while len(jobs) < 100:
            jobs.append(t.run("sbatch --parsable --hold --wrap true").stdout.decode().strip())
        ids = jobs[:100]
        status_ms = timed(lambda: remote_states(t, ids, {}), args.runs)
        squeue_ms = timed(lambda: t.run(f"squeue --noheader --jobs={','.join(ids)}"), args.runs)
        rows = [
            ("submit --cluster, first (uploads)", first),
            ("submit --cluster, unchanged", unchanged),
            ("floor: render + ssh HOST sbatch", floor_ms),
            ("status of 100 jobs (one round trip)", status_ms),
            ("ssh HOST squeue (100 jobs)", squeue_ms),
        ]
        for name, ms in rows:
            print(f"{name:40} {ms:8.0f} ms")
        print(f"unchanged submit / floor: {unchanged / floor_ms:.2f}x (goal: at most 1.5x)")
    finally:
        if jobs:
            t.run("scancel " + " ".join(shlex.quote(j) for j in jobs if j))
        subprocess.run([*t.ssh, *t.options(master=False), "-O", "exit", t.host], capture_output=True, check=False)
        server.remove()


if __name__ == "__main__":
    main()
