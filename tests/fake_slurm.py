"""The one stand-in for Slurm's client commands in the unit tests (the real cluster is in tests/cluster/).

A `FakeSlurm` answers each command line with the newest rule that matches it (the whole argv, or a prefix of it)
and keeps every call. It serves as the runner of a `SlurmClient` (`fake.client()`), or, for code that runs the
commands itself (the CLI in-process), as stand-in executables on PATH (`fake.install(bin_dir)`), which replay the
same rules and log their calls for the test to read. A command no rule answers fails the test.

Answers are recorded Slurm output (`recording="show-job-o-running"`, tests/data/slurm/<version>/, the fake's
`version`), literal text, a sequence of either (one per call, the last one repeated), a function of the argv,
or a timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from recorded import PRIMARY, recorded

from slurmgen.slurm.client import DEFAULT_TIMEOUT, SlurmClient

Done = subprocess.CompletedProcess[str]
Answer = Callable[[list[str]], Done]


def done(stdout: str = "", stderr: str = "", rc: int = 0) -> Done:
    return subprocess.CompletedProcess([], rc, stdout, stderr)


def timed_out(argv: list[str]) -> Done:
    raise subprocess.TimeoutExpired(argv, DEFAULT_TIMEOUT)


class Call(NamedTuple):
    argv: list[str]
    env: Mapping[str, str] | None

    @property
    def line(self) -> str:
        return " ".join(self.argv)


@dataclass
class _Rule:
    argv: tuple[str, ...]
    exact: bool
    answers: list[Answer]
    static: list[Done] | None  # the same answers as plain results, when they are (for install)

    def matches(self, argv: Sequence[str]) -> bool:
        return tuple(argv) == self.argv if self.exact else tuple(argv[: len(self.argv)]) == self.argv

    def answer(self, argv: list[str]) -> Done:
        take = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if self.static is not None and len(self.static) > 1:
            self.static.pop(0)
        return take(argv)


@dataclass
class FakeSlurm:
    rules: list[_Rule] = field(default_factory=list)
    version: str = PRIMARY  # whose recordings `recording=` answers with
    _calls: list[Call] = field(default_factory=list)
    _bin: Path | None = None

    # -- rules ---------------------------------------------------------------------------------------------------

    def on(
        self,
        *argv: str,
        recording: str | Sequence[str] | None = None,
        out: str = "",
        err: str = "",
        rc: int = 0,
        answer: Answer | None = None,
        timeout: bool = False,
        exact: bool = False,
    ) -> FakeSlurm:
        """Answer command lines that start with ``argv`` (or equal it, with ``exact``)."""
        static: list[Done] | None
        if answer is not None or timeout:
            answers: list[Answer] = [answer if answer is not None else timed_out]
            static = None
        elif recording is not None:
            names = [recording] if isinstance(recording, str) else list(recording)
            static = [recorded(name, self.version) for name in names]
            answers = [_fixed(result) for result in static]
        else:
            static = [done(out, err, rc)]
            answers = [_fixed(static[0])]
        self.rules.insert(0, _Rule(tuple(argv), exact, answers, static))
        self._write_rules()
        return self

    # -- as a SlurmClient runner ---------------------------------------------------------------------------------

    def __call__(self, argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> Done:
        assert timeout > 0
        self._calls.append(Call(list(argv), env))
        for rule in self.rules:
            if rule.matches(argv):
                result = rule.answer(list(argv))
                return subprocess.CompletedProcess(list(argv), result.returncode, result.stdout, result.stderr)
        raise AssertionError(f"unexpected Slurm command: {list(argv)}")

    def client(self, env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> SlurmClient:
        return SlurmClient(self, env=env, timeout=timeout)

    # -- what was asked ------------------------------------------------------------------------------------------

    @property
    def calls(self) -> list[Call]:
        if self._bin is None:
            return list(self._calls)
        log = self._bin / "calls.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return [Call(entry["argv"], entry["env"]) for entry in map(json.loads, lines)]

    def lines(self) -> list[str]:
        return [call.line for call in self.calls]

    def commands(self, name: str) -> list[list[str]]:
        return [call.argv for call in self.calls if call.argv[0] == name]

    # -- as executables on PATH ----------------------------------------------------------------------------------

    @property
    def bin_dir(self) -> Path:
        assert self._bin is not None, "install() first"
        return self._bin

    def env_of(self, command: str) -> Mapping[str, str]:
        """The environment the last call of ``command`` ran in."""
        envs = [call.env for call in self.calls if call.argv[0] == command]
        assert envs and envs[-1] is not None, f"{command} was not run"
        return envs[-1]

    def install(self, bin_dir: Path, names: Sequence[str] = ("sbatch", "scontrol", "squeue", "scancel")) -> Path:
        """Stand-in executables in ``bin_dir`` that replay the rules (plain answers only) and log their calls."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        self._bin = bin_dir
        for name in names:
            exe = bin_dir / name
            exe.write_text(f"#!{sys.executable}\n{_STAND_IN}")
            exe.chmod(0o755)
        self._write_rules()
        return bin_dir

    def _write_rules(self) -> None:
        if self._bin is None:
            return
        rules = []
        for rule in self.rules:
            if rule.static is None:
                raise AssertionError("installed stand-ins replay plain answers only (no functions, no timeouts)")
            first = rule.static[0]
            rules.append({"argv": list(rule.argv), "exact": rule.exact, "out": first.stdout, "err": first.stderr,
                          "rc": first.returncode})  # fmt: skip
        (self._bin / "rules.json").write_text(json.dumps(rules))


def _fixed(result: Done) -> Answer:
    return lambda argv: result


# The program of an installed stand-in: finds its rule, logs argv and environment, prints the answer.
_STAND_IN = r"""
import json, os, sys
here = os.path.dirname(os.path.abspath(sys.argv[0]))
argv = [os.path.basename(sys.argv[0]), *sys.argv[1:]]
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({"argv": argv, "env": dict(os.environ)}) + "\n")
for rule in json.load(open(os.path.join(here, "rules.json"))):
    n = len(rule["argv"])
    if (argv == rule["argv"]) if rule["exact"] else (argv[:n] == rule["argv"]):
        sys.stdout.write(rule["out"])
        sys.stderr.write(rule["err"])
        sys.exit(rule["rc"])
sys.stderr.write("stand-in %s: no rule answers %r\n" % (argv[0], argv))
sys.exit(99)
"""


# --- a multi-cluster site ----------------------------------------------------------------------------------------


class FakeClusters:
    """Stand-in sbatch, scontrol, squeue and scancel of a multi-cluster site (several clusters behind one login
    node, their names resolved by slurmdbd), for what the local test cluster cannot be: it has no slurmdbd, and
    refuses every `-M` (docs/remote.md, "Multi-cluster sites"). Stateful where FakeSlurm replays: the jobs live in a
    JSON file beside the stand-ins.

    As Slurm does: `sbatch -M a,b` (or `#SBATCH --clusters=a,b` in the script, or SLURM_CLUSTERS) submits to one of
    them and answers `<id>;<cluster>` with --parsable (src/sbatch/sbatch.c); sbatch picks the one where the job
    starts first, the stand-in the last one named, so that a test cannot pass by keeping the first. Each cluster
    counts its own job ids from 42, so two clusters have a job 42 each. A command without `-M` asks the login
    node's own cluster (`local`), which knows none of them: "Invalid job id specified", as a real one would, or
    worse, another user's job of the same id. squeue prints `CLUSTER: <name>` first when not told --noheader
    (src/squeue/squeue.c), then a row per job in the codes of --format it knows. A batch job writes one line to its
    --output file when submitted."""

    def __init__(self, bin_dir: Path, clusters: Sequence[str] = ("alpha", "beta"), local: str = "home") -> None:
        self.bin_dir = bin_dir
        bin_dir.mkdir(parents=True, exist_ok=True)
        state = {"local": local, "clusters": {name: {"next": 42, "jobs": {}} for name in (*clusters, local)}}
        (bin_dir / "clusters.json").write_text(json.dumps(state))
        for name in ("sbatch", "scontrol", "squeue", "scancel"):
            exe = bin_dir / name
            exe.write_text(f"#!{sys.executable}\n{_CLUSTERS_STAND_IN}")
            exe.chmod(0o755)

    @property
    def calls(self) -> list[list[str]]:
        log = self.bin_dir / "calls.jsonl"
        return [json.loads(line)["argv"] for line in log.read_text().splitlines()] if log.exists() else []

    def jobs(self, cluster: str) -> dict[str, dict[str, object]]:
        """The jobs of one cluster by id: name, state, restarts, signals, output."""
        state = json.loads((self.bin_dir / "clusters.json").read_text())
        jobs: dict[str, dict[str, object]] = state["clusters"][cluster]["jobs"]
        return jobs


# The stand-ins' program: one file of state, read and written whole by each call (the CLI runs one at a time).
_CLUSTERS_STAND_IN = r"""
import json, os, re, shlex, sys
here = os.path.dirname(os.path.abspath(sys.argv[0]))
command, args = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({"argv": [command, *args], "env": {}}) + "\n")
path = os.path.join(here, "clusters.json")
state = json.load(open(path))

def fail(message, rc=1):
    sys.stderr.write(message + "\n")
    sys.exit(rc)

# -M NAME, -MNAME, --clusters=NAME, --cluster=NAME anywhere (getopt permutes), as every command reads them
named, rest, i = None, [], 0
while i < len(args):
    a = args[i]
    if a == "-M" or a in ("--clusters", "--cluster"):
        named, i = args[i + 1], i + 2
        continue
    if a.startswith("-M") and len(a) > 2:
        named = a[2:]
    elif a.startswith(("--clusters=", "--cluster=")):
        named = a.split("=", 1)[1]
    else:
        rest.append(a)
    i += 1
if command == "sbatch":
    script = rest[-1]
    directives = {}
    for line in open(script).read().splitlines()[1:]:
        if not line.startswith("#SBATCH"):
            if line.strip() and not line.startswith("#"):
                break
            continue
        for word in shlex.split(line[len("#SBATCH"):]):
            key, _, value = word.partition("=")
            directives[{"-M": "--clusters", "--cluster": "--clusters"}.get(key, key)] = value
    options = {k: v for k, v in (w.partition("=")[::2] for w in rest[:-1])}
    named = named or directives.get("--clusters") or os.environ.get("SLURM_CLUSTERS")
    names = named.split(",") if named else [state["local"]]
    for name in names:
        if name not in state["clusters"]:
            fail("sbatch: error: '%s' can't be reached now, or it is an invalid entry for --cluster.  "
                 "Use 'sacctmgr list clusters' to see available clusters." % named)
    cluster = names[-1]
    jobs = state["clusters"][cluster]
    job = str(jobs["next"])
    jobs["next"] += 1
    workdir = options.get("--chdir") or directives.get("--chdir") or os.getcwd()
    out = os.path.join(workdir, directives.get("--output", "slurm-%j.out"))
    out = out.replace("%x", directives.get("--job-name", "job")).replace("%j", job)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "a") as log:
        log.write("hello from cluster %s, job %s\n" % (cluster, job))
    jobs["jobs"][job] = {"name": directives.get("--job-name", "job"), "state": "RUNNING", "restarts": 0,
                         "signals": [], "output": out, "script": os.path.abspath(script), "workdir": workdir,
                         "comment": options.get("--comment", "")}
    json.dump(state, open(path, "w"))
    shown = "" if cluster == state["local"] else cluster
    if "--parsable" in rest:
        print(job + (";" + shown if shown else ""))
    else:
        print("Submitted batch job " + job + (" on cluster " + shown if shown else ""))
    sys.exit(0)

cluster = named or state["local"]
if cluster not in state["clusters"] or "," in cluster:
    fail("%s: error: '%s' can't be reached now, or it is an invalid entry for --cluster.  "
         "Use 'sacctmgr list clusters' to see available clusters." % (command, cluster))
jobs = state["clusters"][cluster]["jobs"]

def job_of(text):
    return jobs.get(re.sub(r"[._+].*", "", text))

if command == "squeue":
    if "--noheader" not in rest:
        print("CLUSTER: " + cluster)
    options = {k: v for k, v in (w.partition("=")[::2] for w in rest)}
    asked = options["--jobs"].split(",") if options.get("--jobs") else sorted(jobs)
    codes = options.get("--format", "%i").split("\x1f")
    for job in asked:
        found = job_of(job)
        if found is None:
            continue
        values = {"%i": job, "%A": job, "%T": found["state"], "%r": "None", "%M": "0:05", "%l": "5:00", "%D": "2",
                  "%N": "node[1-2]", "%P": "debug", "%j": found["name"], "%k": found["comment"]}
        print("\x1f".join(values[code] for code in codes))
    sys.exit(0)
if command == "scancel":
    found = job_of(rest[-1])
    if found is None:
        fail("scancel: error: Kill job error on job id %s: Invalid job id specified" % rest[-1])
    signal = next((w.split("=", 1)[1] for w in rest if w.startswith("--signal=")), None)
    if signal is None:
        found["state"] = "CANCELLED"
    else:
        found["signals"].append(signal)
    json.dump(state, open(path, "w"))
    sys.exit(0)
words = [w for w in rest if w not in ("--oneliner", "-o")]
if words[:2] == ["show", "job"]:
    found = job_of(words[2])
    if found is None:
        fail("slurm_load_jobs error: Invalid job id specified")
    exit_code = {"CANCELLED": "0:15"}.get(found["state"], "0:0")
    print(" ".join([
        "JobId=%s JobName=%s UserId=root(0) GroupId=root(0) JobState=%s Reason=None Requeue=1 Restarts=%d"
        % (re.sub(r"[._+].*", "", words[2]), found["name"], found["state"], found["restarts"]),
        "BatchFlag=1 ExitCode=%s RunTime=00:00:05 TimeLimit=00:05:00 Partition=debug NodeList=node[1-2]" % exit_code,
        "BatchHost=node1 NumNodes=2 NumCPUs=4 NumTasks=4 Command=%s WorkDir=%s StdErr=%s StdIn=/dev/null StdOut=%s"
        % (found["script"], found["workdir"], found["output"], found["output"]),
    ]))
    sys.exit(0)
if words[:2] == ["show", "step"]:
    sys.exit(0)
if words and words[0] in ("requeue", "requeuehold", "release"):
    found = job_of(words[-1])
    if found is None:
        fail("Requeue of JobId=%s returned an error: Invalid job id specified" % words[-1])
    if words[0] != "release":
        found["state"], found["restarts"] = ("PENDING", found["restarts"] + 1)
    json.dump(state, open(path, "w"))
    sys.exit(0)
fail("stand-in %s: no answer for %r" % (command, [command, *args]), 99)
"""
