"""`python -m slurmgen` and the `slurmgen` console script."""

from __future__ import annotations

import sys


def main() -> int:
    from slurmgen.cli.app import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
