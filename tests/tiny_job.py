"""The small job the submit tests (fake Slurm commands and recorded answers) use, and where the recordings are."""

from pathlib import Path

HANDWRITTEN = Path(__file__).parent / "data" / "slurm"  # handwritten-* forms; one directory per Slurm version
DATA = HANDWRITTEN / "22.05"  # recorded Slurm output, one file per form
SPEC = """\
name: tiny
command: [python3, -c, "print(1)"]
time: "00:05:00"
nodes: 2
tasks_per_node: 2
output: {output}
"""
