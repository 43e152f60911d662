"""`python -m slurmgen` and the `slurmgen` console script."""

from __future__ import annotations

import sys


def main() -> int:
    from slurmgen import cli_fast

    code = cli_fast.run(sys.argv[1:])
    if code is not None:
        return code
    from slurmgen.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
