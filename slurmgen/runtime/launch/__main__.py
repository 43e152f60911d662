"""``python3 -m slurmgen.runtime.launch ...`` (scripts rendered before slurmgen.task existed): the same entry point."""

import sys

from slurmgen.runtime.launch import main

sys.exit(main())
