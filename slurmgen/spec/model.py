"""The job spec as the rest of slurmgen sees it: frozen values with every default resolved.

Built by slurmgen.spec.load from a YAML file; rendered by slurmgen.script, planned by slurmgen.submission. The fields
are declared once, in the field table (spec/fields.py); spec/model_fields.py is generated from it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from slurmgen.errors import Problem
from slurmgen.spec.fields import PER_NODE_LAUNCHERS
from slurmgen.spec.model_fields import (
    ContainerSpec,
    DistributedSpec,
    JobFields,
    PreemptionSpec,
    RecoverySpec,
    TrackersSpec,
)

__all__ = [
    "ContainerSpec",
    "DistributedSpec",
    "JobFields",
    "JobSpec",
    "LoadedSpec",
    "PreemptionSpec",
    "RecoverySpec",
    "TrackersSpec",
    "node_checks",
]


def node_checks(spec: JobSpec) -> bool:
    """Are the allocation's nodes checked before every start of the step (batch/nodes.py)? When the spec
    asks (a health check, spare nodes), and for every GPU job with recovery on: a CPU job with neither has only
    its state directory to check, which the batch shell's own mkdir and the first save already show, and one
    more job step per start would cost it about a second for nothing."""
    rec = spec.recovery
    return bool(rec.health_check) or rec.spare_nodes > 0 or (rec.enabled and spec.gpus_per_node > 0)


# --- hand-written: what the model has beyond the table's fields ---------------------------------------------
# Fields added after digests were first kept (the resume state is keyed by them): left out, they stay out of the
# digest (empty, None).
ADDED_EMPTY = ("srun", "error", "teardown", "progress", "checkpoint", "resume")
# Fields added later with a default: at that default they stay out of the digest too.
ADDED_DEFAULT: dict[str, Any] = {"setup_fail_fast": True}

# The recovery fields added later, and their defaults: a job that leaves them at the default keeps its digest.
RECOVERY_ADDED: dict[str, Any] = {"expedite": False}

# The container fields added with runtimes enroot and apptainer, and their defaults (spec/fields.py).
CONTAINER_ADDED: dict[str, Any] = {
    "runtime": "pyxis",
    "python": None,
    "env": (),
    "writable_tmpfs": None,
    "cleanenv": None,
    "containall": None,
    "gpu": None,
}


@dataclass(frozen=True)
class JobSpec(JobFields):
    """The resolved job spec. Its fields come from the field table (spec/model_fields.py, generated); the
    derived fields and the methods are here."""

    time_seconds: int | None  # the time limit in seconds (whole minutes, as Slurm counts); None: UNLIMITED

    @property
    def world_size(self) -> int:
        return self.nodes * self.nproc_per_node

    @property
    def run_on_bad_exit(self) -> bool:
        """`srun: {kill-on-bad-exit: false}`: one failing task leaves the others running, and srun waits for all of
        them (srun(1) -K, --kill-on-bad-exit); slurmgen writes 1 otherwise (script/step.py)."""
        return dict(self.srun).get("kill-on-bad-exit") == "0"

    @property
    def per_node_launcher(self) -> bool:
        """One launcher task per node that starts nproc_per_node workers (torchrun, accelerate), not srun's
        task per rank."""
        return self.launcher in PER_NODE_LAUNCHERS

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.sweep is None:
            del out["sweep"]  # a job without a sweep keeps the digest it had before sweeps existed
        for key in ADDED_EMPTY:
            if not out[key]:
                del out[key]  # a job that leaves a newer field out keeps the digest it had before that field existed
        for key, default in RECOVERY_ADDED.items():
            if out["recovery"][key] == default:
                del out["recovery"][key]
        if out["steps"] == 1:
            del out["steps"]  # likewise: one step is what every job did before steps existed
        if not out["torchrun"]["extra_args"]:
            del out["torchrun"]  # added after digests were first kept: left empty, the digest stays as it was
        for key, default in ADDED_DEFAULT.items():
            if out[key] == default:
                del out[key]
        if out.get("container") is not None:
            # A pyxis container that uses none of the fields added with the other runtimes keeps its old digest.
            for key, default in CONTAINER_ADDED.items():
                if out["container"][key] == default:
                    del out["container"][key]
        return out

    @cached_property  # frozen: computed once (render and the submit plan both ask for it)
    def digest(self) -> str:
        """Short hash of the resolved spec: keys the resume state to this exact job definition."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class LoadedSpec:
    spec: JobSpec
    warnings: tuple[Problem, ...]
    # (field, value, where it came from) for every field given, when a cluster profile was layered under the spec
    origins: tuple[tuple[str, Any, str], ...] = ()
    # what slurmgen chose that the user may not expect (spec.rules); said by every command, never an error
    notes: tuple[Problem, ...] = ()
