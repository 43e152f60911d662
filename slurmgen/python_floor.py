"""The oldest Python the in-job processes run on, checked before anything else is imported.

The batch shell's helper (slurmgen.batch) and each task's entry point (slurmgen.task) run with the spec's
``python``, which inside a container may be older than this floor: they get one line instead of a SyntaxError
or TypeError deep inside. slurmgen.runtime checks the same floor inline (it may import nothing; its README
says why). Written for any Python 3 (plain annotations and f-strings only: nothing that an old parser refuses).
"""

import sys

# The oldest Python the suite runs the in-job code with (torch included): pyproject.toml's requires-python.
MIN_PYTHON = (3, 11)


def refuse_older(part: str) -> None:
    """One ``slurmgen: ...`` line and exit 1 under ``python -m``; an ImportError for an import."""
    if sys.version_info >= MIN_PYTHON:
        return
    message = (
        f"slurmgen's {part} needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer in the task; this is "
        f"{sys.version.split()[0]} ({sys.executable}): use a newer image or set the spec field python"
    )
    if sys.argv[:1] == ["-m"]:  # `python -m slurmgen.task` (runpy sets argv[0] to "-m" while it imports)
        print(f"slurmgen: {message}", file=sys.stderr)
        raise SystemExit(1)
    raise ImportError(message)
