"""The small job the submit tests (fake Slurm commands and recorded answers) use."""

SPEC = """\
name: tiny
command: [python3, -c, "print(1)"]
time: "00:05:00"
nodes: 2
tasks_per_node: 2
output: {output}
"""
