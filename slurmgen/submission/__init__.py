"""What every kind of job shares to submit: the plan (pure: script, sbatch argv, run directory), a sweep's plan
and its journal record, the one sweep path that sends a sweep's arrays through any backend, and what a JOB
argument names in the journal. The journal itself and the submit token are slurmgen.journal."""
