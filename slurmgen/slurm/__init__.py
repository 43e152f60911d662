"""Talking to Slurm: the client commands (client), job ids and states (ids), parsers of what the commands print
(parse, showjob) and the words they print for a value (formats), and Slurm's time formats (times). Standard library
only: the in-task runtime imports it."""
