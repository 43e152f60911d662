"""``python3 -m slurmgen.runtime.batch ...`` (scripts rendered before slurmgen.batch existed): the same helper."""

import sys

from slurmgen.batch.commands import main

sys.exit(main())
