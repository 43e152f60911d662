"""The transport: how commands reach a cluster, on this machine or through the user's OpenSSH client with one
ControlMaster connection per cluster. What rides on it to submit and ask over ssh is the ssh backend's
(slurmgen.backends.slurm_ssh)."""
