"""The option names of sbatch and srun, and how their getopt_long reads a name given in `sbatch:` or `srun:`.

sbatch (on an #SBATCH line as on its command line) and srun read their options with glibc's getopt_long: a long
option may be abbreviated to any prefix that starts only one option's name (`--partitio` is `--partition`), a
prefix that starts several is refused as ambiguous (`--p`), and an exact name always wins over longer ones
(`--gpus` is not ambiguous with `--gpus-per-node`). So a key of `sbatch:` is not safe to check by its spelling
alone: `partitio` is --partition, which slurmgen writes itself.

The names are those of Slurm 22.05's option table (src/common/slurm_opt.c, `common_options`, the entries with an
sbatch or srun handler), as that release's sbatch and srun print them: glibc lists every candidate in its
"option '--a' is ambiguous; possibilities: ..." message. A name of a later Slurm that is not in these lists is
passed through as it was before (a newer cluster may know it). The short options are those of sbatch(1) and
srun(1), `-p, --partition`, which getopt reads as the same option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


SBATCH_LONG = _names(
    """
    account acctg-freq array batch bb bbf begin chdir cluster cluster-constraint clusters comment constraint
    container context contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot
    dependency distribution error exclude exclusive export export-file extra-node-info get-user-env gid gpu-bind
    gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags help hint hold ignore-pbs input
    job-name kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu
    mincpus network nice no-kill no-requeue nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu
    ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output overcommit oversubscribe parsable partition
    power prefer priority profile propagate qos quiet reboot requeue reservation signal sockets-per-node spread-job
    switches tasks-per-node test-only thread-spec threads-per-core time time-min tmp uid usage use-min-nodes verbose
    version wait wait-all-nodes wckey wrap
    """
)

SRUN_LONG = _names(
    """
    accel-bind account acctg-freq bb bbf bcast bcast-exclude begin chdir cluster cluster-constraint clusters comment
    compress constraint container context contiguous core-spec cores-per-socket cpu-bind cpu-freq cpu_bind
    cpus-per-gpu cpus-per-task deadline debugger-test delay-boot dependency disable-status distribution epilog error
    exact exclude exclusive export extra-node-info gid gpu-bind gpu-freq gpus gpus-per-node gpus-per-socket
    gpus-per-task gres gres-flags help het-group hint hold immediate input interactive job-name jobid
    kill-on-bad-exit label licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus mpi
    msg-timeout multi-prog network nice no-allocate no-kill nodefile nodelist nodes ntasks ntasks-per-core
    ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres open-mode output overcommit overlap
    oversubscribe pack-group partition power prefer preserve-env priority profile prolog propagate pty qos quiet
    quit-on-interrupt reboot relative reservation resv-ports send-libs signal slurmd-debug sockets-per-node
    spread-job switches task-epilog task-prolog tasks-per-node test-only thread-spec threads threads-per-core time
    time-min tmp uid unbuffered usage use-min-nodes verbose version wait wckey whole x11
    """
)

# sbatch(1) and srun(1): `-p, --partition=<partition_names>` and the like.
SBATCH_SHORT = {
    "a": "array", "A": "account", "b": "begin", "B": "extra-node-info", "c": "cpus-per-task", "C": "constraint",
    "d": "dependency", "D": "chdir", "e": "error", "F": "nodefile", "G": "gpus", "h": "help", "H": "hold",
    "i": "input", "J": "job-name", "k": "no-kill", "L": "licenses", "m": "distribution", "M": "clusters",
    "n": "ntasks", "N": "nodes", "o": "output", "O": "overcommit", "p": "partition", "q": "qos", "Q": "quiet",
    "s": "oversubscribe", "S": "core-spec", "t": "time", "v": "verbose", "V": "version", "w": "nodelist",
    "W": "wait", "x": "exclude",
}  # fmt: skip

SRUN_SHORT = {
    "A": "account", "b": "begin", "B": "extra-node-info", "c": "cpus-per-task", "C": "constraint",
    "d": "dependency", "D": "chdir", "e": "error", "E": "preserve-env", "G": "gpus", "h": "help", "H": "hold",
    "i": "input", "I": "immediate", "J": "job-name", "k": "no-kill", "K": "kill-on-bad-exit", "l": "label",
    "L": "licenses", "m": "distribution", "M": "clusters", "n": "ntasks", "N": "nodes", "o": "output",
    "O": "overcommit", "p": "partition", "q": "qos", "Q": "quiet", "r": "relative", "s": "oversubscribe",
    "S": "core-spec", "t": "time", "T": "threads", "u": "unbuffered", "v": "verbose", "V": "version",
    "w": "nodelist", "W": "wait", "x": "exclude", "X": "disable-status", "Z": "no-allocate",
}  # fmt: skip


@dataclass(frozen=True)
class Command:
    """One Slurm command's option names."""

    name: str  # sbatch, srun
    long: frozenset[str]
    short: Mapping[str, str]


SBATCH = Command("sbatch", SBATCH_LONG, SBATCH_SHORT)
SRUN = Command("srun", SRUN_LONG, SRUN_SHORT)


@dataclass(frozen=True)
class OptionName:
    """How the command reads a key: `option` is the full long name it means (the key itself when unknown);
    `problem`, when set, says why the key cannot be written as it is."""

    option: str
    problem: str | None = None
    abbreviated: bool = False  # `option` is what getopt_long makes of a prefix


def read_option(key: str, command: Command) -> OptionName:
    """The option `key` names for `command`: a one-letter key is the short option (`p` is -p, --partition); a longer
    one is read as getopt_long reads `--key`."""
    if len(key) == 1 and key in command.short:
        return OptionName(command.short[key])
    if key in command.long:
        return OptionName(key)
    candidates = sorted(name for name in command.long if name.startswith(key))
    if len(candidates) == 1:
        return OptionName(candidates[0], abbreviated=True)
    if candidates:
        shown = ", ".join(f"--{name}" for name in candidates)
        return OptionName(
            key,
            f"{command.name} reads --{key} as an abbreviation, and it starts several options ({shown}), so "
            f"{command.name} refuses it as ambiguous; write the full name of the one you mean",
        )
    return OptionName(key)
