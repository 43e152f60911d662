"""Read the world once: no module of slurmgen reads a job variable except slurmgen/job_context/.

A job variable is one the batch script, Slurm or torchrun hands to an in-job process: a name from slurmgen.contract
that is a variable (``contract.LOG_DIR``, ``contract.RANK``; not a file name or a handler value), a literal
``SLURM_*``, ``SLURMD_*``, ``SLURMGEN_*`` or ``TORCHELASTIC_*``, one of torchrun's names (RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, ...), or a module-level constant of the module holding one of those. A read is ``m[key]``
(not as an assignment target), ``m.get(key)``, ``m.pop(key)``, ``os.getenv(key)`` or ``key in m``, whatever ``m``
is (a mapping handed down is still the raw environment); ``os.environ`` (also as ``os.environ if ... else ...``)
read with a key the scanner cannot resolve counts too. Writes that build a child's environment (``env[key] = v``,
``env.setdefault``, ``env.update``, a copy of the whole environment) are not reads, nor is a variable that is no
job's (PATH, CUDA_VISIBLE_DEVICES, MLFLOW_TRACKING_URI).

Parsed from the source with ``ast``, so a read in a function that no test runs is found as well. What it cannot see:
a key computed at run time from a mapping other than os.environ (``m.get(name)`` in a loop over names).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from slurmgen import contract

PACKAGE = Path(__file__).resolve().parent.parent / "slurmgen"

# Torchrun's own variables (torch/distributed/run.py and elastic/agent/server/local_elastic_agent.py).
TORCHRUN_NAMES = frozenset(
    {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT"}
)
JOB_PATTERN = re.compile(r"^(SLURM_|SLURMD_|SLURMGEN_|TORCHELASTIC_)")

# Paths (relative to slurmgen/) whose reads are allowed, and why.
ALLOWED = {
    # The one home of the parse.
    "job_context/": "the job context: every process reads its environment here, once",
    # The local emulator *is* Slurm for a local run: fake srun, scontrol and scancel read the variables that the
    # real ones read from their caller (srun takes SLURM_JOB_ID, SLURM_NTASKS ... from the batch shell, srun(1)
    # INPUT ENVIRONMENT VARIABLES) to play them; they are not in-job readers of the contract.
    "local/": "the local emulator plays Slurm, which reads its caller's environment",
    # Runs inside the user's interpreter before site-packages are usable (the python start-up hook): it may import
    # nothing of slurmgen, so it takes its one variable itself, and removes it so the program never sees it.
    "task/pyhook/sitecustomize.py": "the start-up hook imports nothing of slurmgen",
    # The floor check runs before any other module of slurmgen is imported, on any Python 3: an interpreter below
    # the floor cannot be trusted to import the job context, so it reads whether it runs inside an image itself.
    "python_floor.py": "the Python floor's check runs before the job context can be imported",
}


# (path, variable): single reads allowed where the name is a job variable's but the read is not of the job.
ALLOWED_KEYS = {
    # `scontrol show config` prints SLURM_VERSION as one of its keys: the parsed output, not the environment.
    ("slurm/site_config.py", "SLURM_VERSION"): "a key of scontrol's output",
    # Where the CLI keeps its journal: the user's setting on the login node as much as in a job (the continuation
    # job's journal entry), like HOME; no script or Slurm sets it.
    ("journal.py", "SLURMGEN_HOME"): "the user's journal directory, not set by the job",
    # The ssh transport runs on the user's laptop or login node, never inside a job: its settings are the user's.
    ("remote/transport.py", "SLURMGEN_SSH_DIR"): "where the user's ssh control sockets live, not a job variable",
    ("remote/transport.py", "SLURMGEN_SSH_CONFIG"): "the user's ssh config file, not a job variable",
    # sbatch's own input variable (sbatch(1), INPUT ENVIRONMENT VARIABLES), read where the user runs sbatch.
    ("backends/slurm_here/sbatch.py", "SLURM_CLUSTERS"): "the submitting shell's choice of clusters for sbatch",
}
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")


def is_job_variable(name: str) -> bool:
    return bool(JOB_PATTERN.match(name)) or name in TORCHRUN_NAMES


def contract_variables() -> dict[str, str]:
    """contract.X -> its value, for each X that names an environment variable (NCCL_SOCKET_IFNAME too: the
    contract hands it over; not ".ready-run", "auto" or "USR2")."""
    return {k: v for k, v in vars(contract).items() if isinstance(v, str) and ENV_NAME.match(v)}


class ReadFinder(ast.NodeVisitor):
    """Finds reads of job variables in one module's tree; ``found`` holds ``line: source`` items."""

    def __init__(self, source: str, allowed_keys: frozenset[str] = frozenset()) -> None:
        self.source = source
        self.allowed_keys = allowed_keys
        self.found: list[str] = []
        self.contract = contract_variables()
        self.constants: dict[str, str] = {}  # NAME = "SLURM_..." at module level

    def key_name(self, node: ast.expr) -> str | None:
        """The variable a key expression names, when it names a job variable."""
        value: str | None = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "contract":
            if node.attr in self.contract:
                return None if self.contract[node.attr] in self.allowed_keys else self.contract[node.attr]
        elif isinstance(node, ast.Name):
            value = self.constants.get(node.id)
        if value is None or value in self.allowed_keys:
            return None
        return value if is_job_variable(value) else None

    @classmethod
    def is_os_environ(cls, node: ast.expr) -> bool:
        """``os.environ``, or a choice between it and something else (``os.environ if m is None else m``)."""
        if isinstance(node, ast.IfExp):
            return cls.is_os_environ(node.body) or cls.is_os_environ(node.orelse)
        return isinstance(node, ast.Attribute) and node.attr == "environ" and ast.unparse(node.value) == "os"

    def report(self, node: ast.AST) -> None:
        self.found.append(f"{getattr(node, 'lineno', 0)}: {ast.get_source_segment(self.source, node)}")

    def visit_Module(self, node: ast.Module) -> None:
        for statement in node.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
                for target in statement.targets:
                    if isinstance(target, ast.Name) and isinstance(statement.value.value, str):
                        self.constants[target.id] = statement.value.value
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and (
            self.key_name(node.slice) or (self.is_os_environ(node.value) and not isinstance(node.slice, ast.Constant))
        ):
            self.report(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if node.args and isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "getenv"):
            key = node.args[0]
            environ = self.is_os_environ(func.value) or (func.attr == "getenv" and ast.unparse(func.value) == "os")
            if (func.attr != "getenv" or environ) and (
                self.key_name(key) or (environ and not isinstance(key, ast.Constant))
            ):
                self.report(node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, ast.In | ast.NotIn) for op in node.ops) and self.key_name(node.left):
            self.report(node)
        self.generic_visit(node)


def reads_in(source: str, allowed_keys: frozenset[str] = frozenset()) -> list[str]:
    finder = ReadFinder(source, allowed_keys)
    finder.visit(ast.parse(source))
    return finder.found


def allowed(relative: str) -> bool:
    return any(relative == place or (place.endswith("/") and relative.startswith(place)) for place in ALLOWED)


def test_no_module_reads_a_job_variable_outside_the_job_context() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not allowed(relative):
            keys = frozenset(name for place, name in ALLOWED_KEYS if place == relative)
            found += [f"slurmgen/{relative}:{line}" for line in reads_in(path.read_text(), keys)]
    assert found == []


def test_the_allow_lists_name_places_that_exist_and_reads_that_are_there() -> None:
    for place in ALLOWED:
        assert (PACKAGE / place).exists(), place
    for place, name in ALLOWED_KEYS:  # an entry that no longer allows anything goes
        text = (PACKAGE / place).read_text()
        assert len(reads_in(text, frozenset({name}))) < len(reads_in(text)), (place, name)


SAMPLE = """
import os
from slurmgen import contract
NAME = "SLURM_PROCID"

def f(env, variable):
    a = os.environ["SLURM_JOB_ID"]
    b = os.environ.get(contract.LOG_DIR, "")
    c = env.get("RANK")
    d = os.getenv("SLURMGEN_HANG_TIMEOUT")
    e = env[NAME]
    f = contract.STATE_DIR in env
    g = os.environ.get(variable)
    h = env.pop(contract.PREEMPT_SIGNAL, None)
    i = (os.environ if env is None else env).get(variable, "")
    j = env.get(contract.NCCL_SOCKET_IFNAME)
    k = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return a, b, c, d, e, f, g, h, i, j, k
"""

WRITES = """
import os
from slurmgen import contract

def child(env, ranks):
    env[contract.RANK] = str(ranks.rank)
    env.setdefault("LOCAL_RANK", "0")
    env.update({contract.WORLD_SIZE: "2"})
    os.environ["SLURMGEN_STEP_PID"] = "1"
    path = os.environ.get("PATH", "")
    return {contract.MASTER_ADDR: "x"}, env.get(contract.HANDLER_AUTO), contract.READY_DIR, path
"""


def test_the_scanner_finds_every_kind_of_planted_read() -> None:
    lines = [item.split(":")[0] for item in reads_in(SAMPLE)]
    assert lines == [str(n) for n in range(7, 18)]


def test_the_scanner_does_not_take_writes_or_other_variables_for_reads() -> None:
    assert reads_in(WRITES) == []


def test_an_allowed_key_allows_only_itself() -> None:
    source = 'def f(raw):\n    return raw.get("SLURM_VERSION"), raw.get("SLURM_JOB_ID")\n'
    found = reads_in(source, frozenset({"SLURM_VERSION"}))
    assert [item.split(": ")[1] for item in found] == ['raw.get("SLURM_JOB_ID")']
