"""Talking to Slurm: the client commands and what `scontrol show job` answers (client), the words
Slurm prints for a job id, a state and a value (ids), parsers of what the other commands print (parse), and Slurm's
time formats (times). Standard library
only: the in-task runtime imports it."""
