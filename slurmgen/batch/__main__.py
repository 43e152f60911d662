"""``python3 -m slurmgen.batch ...``: the entry point the rendered script names (slurmgen.contract.BATCH_ENTRY)."""

import sys

from slurmgen.batch.commands import main

sys.exit(main())
