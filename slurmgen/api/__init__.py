"""The Python API behind `import slurmgen`: submit a spec, attach to a job, ask many jobs' states at once.

The CLI's job commands and these functions ask the same job interface (slurmgen.backends.interface) and submit through
the same path (slurmgen.api.submitting), so the two cannot drift. Every function says in its docstring how many Slurm
queries it costs: each is one short-lived client process that talks to slurmctld.
"""
