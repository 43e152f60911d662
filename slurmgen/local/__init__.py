"""`slurmgen run --local`: run the real rendered script on this machine, with Slurm emulated around it.

- jobenv: what Slurm gives the batch shell and each task (pure functions of plain values);
- plan: the spec as it will run here (CPU fallback, overrides), ids, paths, the timeline;
- procs: process groups in /proc, and ending them with TERM then KILL;
- runner: starts the script, delivers Slurm's signals, requeues, cleans up;
- fake_srun, fake_scontrol, fake_scancel: the `srun`, `scontrol` and `scancel` the script finds first on PATH.
"""
