"""Each task's entry point and supervisor: ``python3 -m slurmgen.task [--torchrun-agent] -- CMD ARGS...``.

Runs in every task of the step (inside the container, if any), before and around the user's program: rank
discovery, rendezvous (prepare.py, rendezvous.py, iface.py), the preemption signal's mask (signal_block.py), the
supervisor that delivers signals and writes the rank's log (supervisor.py, python_hook.py, pyhook/), the hang
watchdog (watchdog.py, node_watch.py) and torchrun's agent (torchrun_agent.py). The batch shell runs
``--rendezvous`` too.

Import-cost rule: standard library and slurmgen's own stdlib-only modules only, until the program needs more: no
torch, typer, jinja2 or yaml at import or on the way to starting the program (torchrun_agent imports torch
when the task *is* torchrun). The supervisor blocks signals first thing, so every millisecond before that is a
window in which a signal kills the task. tests/task/test_task_import.py checks it in a fresh interpreter.
Imports point down only: nothing of slurmgen.batch or slurmgen.runtime (tests/test_layers.py); the user library
imports this package's prepare, rendezvous, signal_block and watchdog.
"""

from slurmgen.python_floor import refuse_older as _refuse_older

_refuse_older("the task supervisor (slurmgen.task)")
