"""Whole-process wall time of `slurmgen render` on a 2-node job, against `python -c pass` and against a peer
(simple_slurm) generating the same script. Prints a table of medians with ratios.

    python bench/render.py [--runs 31]

simple_slurm is installed for this benchmark only, into a throwaway directory (never into your environment).
slurmgen keeps no cache of rendered scripts: every run imports the CLI, validates the spec and renders the
template from scratch, which is what "cold" means here. Goal: under 250 ms on the 2-core development machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "jobs" / "cpu-debug.yaml"  # the 2-node example


def peer_program(script: str) -> str:
    """A simple_slurm program that emits the same directives and body as slurmgen's script.

    The directives and body are baked into the program's text, so the peer pays only for its own import and
    generation, as a user of it would.
    """
    lines = script.splitlines()
    directives = [line.removeprefix("#SBATCH --") for line in lines if line.startswith("#SBATCH --")]
    body = "\n".join(line for line in lines[1:] if not line.startswith("#SBATCH"))
    kwargs = {}
    for d in directives:
        name, _, value = d.partition("=")
        kwargs[name.replace("-", "_")] = value.strip("'") if value else True
    return f"from simple_slurm import Slurm\ns = Slurm(**{kwargs!r})\ns.add_cmd({body!r})\nprint(s.script())\n"


def median_ms(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args()
    slurmgen = shutil.which("slurmgen") or str(Path(sys.executable).parent / "slurmgen")
    render = [slurmgen, "render", str(SPEC)]
    script = subprocess.run(render, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    with tempfile.TemporaryDirectory() as tmp:
        peer_dir = Path(tmp) / "peer"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(peer_dir), "simple_slurm"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        program = Path(tmp) / "peer.py"
        program.write_text(peer_program(script))
        # Bytecode as a user has it: this machine sets PYTHONDONTWRITEBYTECODE, which would make every start of
        # every tool recompile its modules. Dropped for all rows alike, and each command runs once unmeasured.
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        peer_env = {**base, "PYTHONPATH": str(peer_dir)}
        for env, cmd in ((peer_env, [sys.executable, str(program)]), (base, render)):
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
        rows = [
            ("python -c pass", median_ms([sys.executable, "-c", "pass"], args.runs, base)),
            ("simple_slurm (peer)", median_ms([sys.executable, str(program)], args.runs, peer_env)),
            ("slurmgen render (cold, whole process)", median_ms(render, args.runs, base)),
        ]
    floor, peer = rows[0][1], rows[1][1]
    print(f"{'command':38} {'median ms':>10} {'x python':>9} {'x peer':>8}")
    for name, ms in rows:
        print(f"{name:38} {ms:10.1f} {ms / floor:9.2f} {ms / peer:8.2f}")
    print(f"\n{args.runs} runs each, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; spec {SPEC.name}")


if __name__ == "__main__":
    main()
