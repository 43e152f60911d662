"""Jobs on a cluster: the submission plan (plan) and its execution (submit), the journal of submissions
(journal), what a JOB argument means (targets), requeue and cancel (control), status, wait, logs."""
