"""``python3 -m slurmgen.task ...``: the entry point the rendered script names (slurmgen.contract.TASK_ENTRY)."""

import sys

from slurmgen.task.launch import main

sys.exit(main())
