"""slurmgen: YAML job specs to SLURM batch scripts, and the runtime that runs inside every task.

This module imports nothing on purpose: `import slurmgen.runtime` inside a task must stay cheap.
"""

__version__ = "0.1.0"
