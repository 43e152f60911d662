"""Local emulation (`slurmgen run`): the rendered script on this machine, with Slurm emulated around it."""
