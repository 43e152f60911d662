"""Slurm over ssh: the code shipped to the cluster, Slurm's commands run there through one shared connection."""
