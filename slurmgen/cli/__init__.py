"""The command line (Typer): the only place that prints and exits. app holds the application and the one error
boundary; the commands live in spec_commands, job_commands and local_commands."""
