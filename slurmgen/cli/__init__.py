"""The command line (Typer): the only place that prints and exits. app holds the application and the one error
boundary; the commands live in the *_commands modules, each loaded when one of its commands runs (app.COMMANDS)."""
