"""``python3 -m slurmgen.batch ...``: the entry point the rendered script names (slurmgen.contract.BATCH_ENTRY)."""

import sys

_args = sys.argv[1:]
if len(_args) == 3 and _args[0] == "watch" and _args[1].isdigit():
    # The preemption watcher starts beside the step's ranks: its module alone, not every command's imports.
    from slurmgen.batch.watch import main as watch

    sys.exit(watch(int(_args[1]), _args[2]))
else:
    from slurmgen.batch.commands import main

    sys.exit(main())
