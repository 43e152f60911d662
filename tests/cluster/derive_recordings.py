"""Write tests/data/slurm/25.11/ from 26.05's recordings: Slurm 25.11 as its source prints the same commands.

No Debian suite ships 25.11 (bookworm 22.05, trixie and trixie-security 24.11, forky and sid 26.05; no backport
or experimental package; checked against deb.debian.org's indices), so the test cluster cannot run it. Its
output is 26.05's with the differences read in Slurm's source (tags slurm-25-11-7-1 and slurm-26-05-3-1), each
below; everything else was checked to print the same (src/api/allocate.c `--test-only`'s stray ` a`,
src/slurmd/slurmstepd/req.c `DUE to SIGNAL` since 25.05, src/common/log.c's `[time] error:` prefix since 25.05,
src/api/job_info.c `slurm_get_job_stderr`'s empty StdErr, src/scontrol/info_job.c `SubmitLine=`). The directory
is derived, not recorded: tests/data/slurm/README.md says so.

    python3 tests/cluster/derive_recordings.py     # rewrite tests/data/slurm/25.11/
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
SOURCE, TARGET = "26.05", "25.11"
SOURCE_RELEASE, TARGET_RELEASE = "26.05.5", "25.11.7"


def derive(name: str, text: str) -> str:
    """One file of 26.05 as 25.11 prints it."""
    text = text.replace(f"/tmp/slurmgen-cluster-{SOURCE}-", f"/tmp/slurmgen-cluster-{TARGET}-")
    if name.startswith("show-job"):
        # src/scontrol/info_job.c: `Exclusive=` (after OverSubscribe=) is new in 26.05.
        text = re.sub(r" Exclusive=\S*", "", text)
    if name.startswith("requeue-array"):
        # src/slurmctld/job_mgr.c `_resp_array_xlate`: 25.11 prints `%u_%s` (25_0,2), 26.05 the bracketed form
        # of fmt_job_id_string (25_[0,2]).
        text = re.sub(r"\b(\d+)_\[([^\]\s]+)\]", r"\1_\2", text)
    if name.startswith("show-config"):
        text = text.replace(f"= {SOURCE_RELEASE}", f"= {TARGET_RELEASE}")
    if name == "VERSION":
        text = f"slurm {TARGET_RELEASE}\n"
    if name == "squeue-json.out":
        # src/plugins/data_parser/: 25.11's newest parser is v0.0.44 (v0.0.45 is 26.05's). Edited as text, so
        # that the rest stays byte for byte as squeue wrote it (its escaped slashes included).
        major, minor, micro = TARGET_RELEASE.split(".")
        text = text.replace('"data_parser\\/v0.0.45"', '"data_parser\\/v0.0.44"')
        text = re.sub(r'"major": "\d+",(\s+)"micro": "\d+",(\s+)"minor": "\d+"',
                      rf'"major": "{major}",\1"micro": "{micro}",\2"minor": "{minor}"', text)  # fmt: skip
        text = text.replace(f'"release": "{SOURCE_RELEASE}"', f'"release": "{TARGET_RELEASE}"')
    return text


def main() -> int:
    source, target = DATA / SOURCE, DATA / TARGET
    target.mkdir(exist_ok=True)
    for path in sorted(source.iterdir()):
        (target / path.name).write_text(derive(path.name, path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
