"""`slurmgen doctor`: a site command that checks the cluster's preemption set-up (site), without a Slurm client
what can be checked here (offline), and a container's image (image)."""
