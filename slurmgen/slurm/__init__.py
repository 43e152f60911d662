"""Talking to Slurm: the client commands (client), what `scontrol show job` answers (showjob), the words Slurm
prints for a job id, a state and a value (ids), parsers of what the other commands print (parse), Slurm's time
formats (times), what Slurm says about a stopping job now (view) and the retry of the stop path's calls (retry).
Standard library only: the in-task runtime imports it."""
