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
