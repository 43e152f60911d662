"""Who this job is and what it was given, read from the environment once per process.

The rendered script exports the contract's variables (slurmgen/contract.py), Slurm and torchrun export their own;
the batch shell's helper (slurmgen.batch), each task's supervisor (slurmgen.task) and the user's program
(slurmgen.runtime) each build one `JobContext` from them at start and pass it (or the few fields a function needs)
down, instead of parsing the same variables again at every hop. This package is the only place of slurmgen that
reads those variables (tests/test_context_reads.py). `context` holds JobContext, `variables` its fields and
their parse (generated from the contract's table by `generate`), `values` the parse of each variable, `ranks` where
this process sits (torchrun's variables first, then Slurm's, else a single process), `public` the runtime's
functions over them. Callers import what they use from the module that defines it
(`from slurmgen.job_context.context import JobContext`); this file names nothing itself.

The job-key rule (the id that names this job to `scontrol`) is slurmgen.slurm.ids.job_key_of; `key_from` applies it
to Slurm's variables, and the rendered script computes the same key in bash from `KEY_SHELL`, written beside it.

Standard library only (contract, errors and slurm.ids are standard-library leaves): every process imports it.
"""
