"""`slurmgen submit SWEEP --cluster NAME` for a profile with a `host`: a sweep's arrays (slurmgen.submission.sweep_plan,
split at the cluster's MaxArraySize, read over the same connection) submitted one after the other through the
once-only remote call of a single job (slurmgen.backends.slurm_ssh.once), each with its own token and answer file in
the one run directory on the cluster.

The journal records each array as a submission on this machine does (slurmgen.submission.sweep_submit.sweep_extra),
with the cluster's profile; the run directory's spec.resolved.json, which names the points, is written to a copy
here (`<journal dir>/remote/<profile>/runs/<name>/<token>`, the entry's `copy`), so status and logs of a point need
nothing from the cluster but the queue.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from slurmgen.journal import Entry, Journal
from slurmgen.remote.transport import Transport
from slurmgen.spec.model import JobSpec


def send_sweep_remote(
    transport: Transport,
    spec: JobSpec,
    script: str,
    start: str,
    run_dir: str,
    shipped: str,
    base: Entry,
    spec_path: Path,
    overrides: tuple[str, ...],
    journal: Journal,
    clock: Callable[[], float],
    warn: Callable[[str], object],
    secrets: tuple[tuple[str, ...], bytes] = ((), b""),
) -> tuple[str, tuple[str, ...]]:
    """One `scontrol show config` (MaxArraySize), then one once-only submit call per array, in order (array k+1
    may depend on array k's id, as sweep_plan says). ``script`` starts in ``start`` on the cluster; ``run_dir`` and
    ``shipped``: the run's directory and slurmgen's in-job modules there; ``base``: the journal entry of the
    submission; ``secrets``: the `from_env` names and their values for stdin (once.secret_stdin). The sweep's id and
    its array job ids."""
    from slurmgen.backends.slurm_ssh.once import once_script, send_once
    from slurmgen.backends.slurm_ssh.remote_status import transport_runner
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.submission.plan import plan
    from slurmgen.submission.run_dir import write_run_dir
    from slurmgen.submission.sweep_plan import sweep_plan
    from slurmgen.submission.sweep_submit import COPY_KEY, max_array_size, send_sweep, sweep_extra

    profile = str(base.extra["profile"])
    names, values = secrets
    copies = journal.base / "remote" / profile
    # the job starts in the snapshot: the plan's paths are the cluster's (spec.chdir and output are absolute there)
    given = base.extra.get("args")
    after = tuple(str(a) for a in given) if isinstance(given, list) else ()  # after `--`: the run directory keeps them
    p = plan(spec_path, spec, script, copies, Path(start), base.token, overrides, args=after)
    sp = sweep_plan(p, max_array_size(SlurmClient(run=transport_runner(transport))))
    write_run_dir(p, journal.base)

    def send(k: int, args: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        # the once-only call adds the --comment with array k's token; the rest are the sweep's own options
        args = tuple(a for a in args if not a.startswith("--comment="))
        token = sp.token(k)
        entry = dataclasses.replace(base, token=token, array=True, time=clock(),
                                    extra={**base.extra, **sweep_extra(sp, k), COPY_KEY: str(p.run_dir)})  # fmt: skip
        command = once_script(run_dir, str(base.log_dir), shipped, spec, token, args,
                              jobid=f"jobid-a{k}", error_dir=spec.error, secrets=names)  # fmt: skip
        return send_once(transport, command, values + script.encode(), entry, journal, clock, warn).job_id, ()

    done = send_sweep(sp, send)
    return done.sweep_id, done.jobs
