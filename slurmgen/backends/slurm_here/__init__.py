"""Slurm on this machine: sbatch, scontrol, squeue and scancel run here (backend, sbatch, job, sweep)."""
