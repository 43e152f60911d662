"""The small job the submit tests (fake Slurm commands and recorded answers) use."""

SPEC = """\
name: tiny
command: [python3, -c, "print(1)"]
time: "00:05:00"
nodes: 2
tasks_per_node: 2
output: {output}
"""

# The one warning its five minutes give: the default lead time, 300 s, is cut to a quarter of the limit.
LEAD_CUT = (
    "warning: tiny.yaml: preemption.lead_time: left out, so the default 300 s is cut to 75 s, a quarter of the "
    "00:05:00 limit; write lead_time to choose it\n"
)
