"""The answers the job commands give the same way for more than one kind of job: status tables, a sweep's rows,
history rows, reading and following logs, waiting, requeue and cancel planning, resume planning. The Slurm-shaped
ones (one scontrol, squeue or scancel each) serve both Slurm backends: on this machine and over ssh."""
