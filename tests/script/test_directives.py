"""The #SBATCH directives and the step's command line are computed in Python; these tests pin them down."""

from __future__ import annotations

from slurmgen.script.directives import directives, sq
from slurmgen.script.step import step_words
from slurmgen.spec.load import load_text
from slurmgen.spec.model import JobSpec

BASE = "name: t\ncommand: [python, train.py]\ntime: '02:00:00'\n"


def spec(extra: str = "") -> JobSpec:
    return load_text(BASE + extra, "t.yaml").spec


def opts(s: JobSpec) -> dict[str, str | None]:
    return {d.option: d.value for d in directives(s)}


def test_preemption_directives() -> None:
    d = opts(spec("preemption:\n  signal: HUP\n  lead_time: 600\n"))
    assert d["requeue"] is None and "requeue" in d
    assert d["signal"] == "B:HUP@600"
    assert d["open-mode"] == "append"
    assert d["output"] == "logs/t-%j.log"


def test_no_requeue_or_signal_without_preemption() -> None:
    d = opts(spec("preemption: false\n"))
    assert "requeue" not in d and "signal" not in d
    assert d["open-mode"] == "append"  # a node-failure requeue must not truncate the log either


def test_resources() -> None:
    d = opts(
        spec(
            "nodes: 2\ngpus_per_node: 4\ncpus_per_task: 8\nmem: 64G\npartition: gpu\naccount: a\nqos: q\n"
            "constraint: 'a100&ib'\n"
        )
    )
    assert d == d | {
        "nodes": "2",
        "ntasks-per-node": "4",
        "gpus-per-node": "4",
        "cpus-per-task": "8",
        "mem": "64G",
        "partition": "gpu",
        "account": "a",
        "qos": "q",
        "constraint": "a100&ib",
        "time": "02:00:00",
        "job-name": "t",
    }


def test_array_logs_use_the_task_key() -> None:
    d = opts(spec("array: 0-3%2\n"))
    assert d["array"] == "0-3%2" and d["output"] == "logs/t-%A_%a.log"


def test_extra_directives_come_last_in_spec_order() -> None:
    ds = directives(spec("sbatch:\n  exclusive: true\n  mail-type: END\n  comment: 'a # b'\n"))
    assert [(d.option, d.value) for d in ds[-3:]] == [("exclusive", None), ("mail-type", "END"), ("comment", "a # b")]
    assert ds[-1].line() == "#SBATCH --comment='a # b'"


def test_quoting_is_always_single_quotes() -> None:
    assert sq("plain") == "'plain'"
    assert sq("it's") == "'it'\"'\"'s'"


def test_srun_step_one_task_per_gpu() -> None:
    words = step_words(spec("nodes: 2\ngpus_per_node: 4\ncpus_per_task: 6\n"))
    assert words[:5] == ["srun", "--nodes=2", "--ntasks-per-node=4", "--cpus-per-task=6", "--kill-on-bad-exit=1"]
    assert words[-6:] == ["python3", "-m", "slurmgen.task", "--", "python", "train.py"]


def test_torchrun_step() -> None:
    words = step_words(spec("launcher: torchrun\nnodes: 2\ngpus_per_node: 8\npreemption:\n  signal: HUP\n"))
    assert "--ntasks-per-node=1" in words
    agent = words.index("--torchrun-agent")
    assert words[agent - 3 : agent] == ["python3", "-m", "slurmgen.task"]
    assert "--nnodes=2" in words and "--nproc-per-node=8" in words
    assert '--rdzv-endpoint="${MASTER_ADDR}:${MASTER_PORT}"' in words
    assert "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2" in words
    assert "--shutdown-timeout=300" in words
    assert words[-2:] == ["python", "train.py"]


def test_torchrun_forwards_usr1_when_it_is_the_signal() -> None:
    words = step_words(spec("launcher: torchrun\ngpus_per_node: 1\n"))
    assert "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2" in words


def test_container_step() -> None:
    words = step_words(
        spec(
            "container:\n  image: 'nvcr.io#nvidia/pytorch:24.05-py3'\n  mounts: [/d:/d:ro]\n"
            "  workdir: /w\n  mount_home: false\n  writable: true\n"
        )
    )
    assert "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in words
    mounts = next(w for w in words if w.startswith("--container-mounts="))
    assert "/opt/slurmgen/slurmgen:ro" in mounts and "${SLURMGEN_STATE_DIR}" in mounts and "/d:/d:ro" in mounts
    assert {"--container-workdir=/w", "--no-container-mount-home", "--container-writable"} <= set(words)
    entry = words.index("-c")
    assert 'sys.path.insert(0, "/opt/slurmgen")' in words[entry + 1]


def test_srun_options_join_the_step_line_before_the_program() -> None:
    s = spec(
        "srun:\n  mpi: pmix\n  cpu-bind: cores\n  distribution: 'block:cyclic'\n  overcommit: true\n  wait: 0\n"
        "  label: false\n  cpu_bind: none\n"
    )
    words = step_words(s)
    entry = words.index("slurmgen.task") - 2
    options = words[words.index("--open-mode=append") + 1 : entry]
    assert options == ["--mpi=pmix", "--cpu-bind=cores", "--distribution=block:cyclic", "--overcommit", "--wait=0",
                       "--cpu_bind=none"]  # fmt: skip
    assert "--kill-on-bad-exit=1" in words


def test_srun_kill_on_bad_exit_false_replaces_slurmgens_own() -> None:
    for given in ("false", "0", "'0'"):
        words = step_words(spec(f"srun:\n  kill-on-bad-exit: {given}\n"))
        assert [w for w in words if w.startswith("--kill-on-bad-exit")] == ["--kill-on-bad-exit=0"]


def test_srun_short_option_is_written_long() -> None:
    words = step_words(spec("srun:\n  l: true\n  K: 0\n"))
    assert "--label" in words and "--kill-on-bad-exit=0" in words and "--kill-on-bad-exit=1" not in words


def test_srun_options_keep_the_digest_when_left_out() -> None:
    assert spec().digest == spec("srun: {}\n").digest != spec("srun: {mpi: pmix}\n").digest


def test_one_letter_sbatch_key_is_its_short_option_written_long() -> None:
    ds = directives(spec("sbatch:\n  x: node3\n  W: true\n  exclusive: true\n"))
    assert [d.line() for d in ds[-3:]] == ["#SBATCH --exclude='node3'", "#SBATCH --wait", "#SBATCH --exclusive"]


def test_the_cluster_of_a_multi_cluster_site_in_each_spelling() -> None:
    """sbatch reads -M, --cluster and --clusters as one option (src/sbatch/opt.c); the spec takes each."""
    for key in ("M", "clusters", "cluster"):
        ds = directives(spec(f"sbatch:\n  {key}: alpha,beta\n"))
        assert ds[-1].line() == f"#SBATCH --{'clusters' if key == 'M' else key}='alpha,beta'"


def test_an_option_of_a_later_slurm_passes_as_written() -> None:
    ds = directives(spec("sbatch:\n  some-new-option: 1\n"))
    assert ds[-1].line() == "#SBATCH --some-new-option='1'"


def test_error_puts_the_batch_shells_stderr_apart() -> None:
    d = opts(spec("error: logs/err\n"))
    assert d["output"] == "logs/t-%j.log" and d["error"] == "logs/err/t-%j.err"
    assert opts(spec("error: logs\narray: 0-3\n"))["error"] == "logs/t-%A_%a.err"  # never the output log's name
    assert "error" not in opts(spec())
    assert spec().digest != spec("error: logs\n").digest


def test_error_leaves_the_per_node_logs_alone() -> None:
    words = step_words(spec("error: errs\n"))
    assert '--output="${SLURMGEN_LOG_DIR}/%N.log"' in words and not any(w.startswith("--error") for w in words)


def test_time_left_out_writes_no_limit() -> None:
    s = load_text("name: t\ncommand: [python, train.py]\npreemption: false\n", "t.yaml").spec
    assert s.time is None and s.time_seconds is None
    assert "time" not in opts(s)


def test_requeue_is_the_users_own_with_preemption_off() -> None:
    d = opts(spec("preemption: false\nsbatch:\n  requeue: true\n"))
    assert "requeue" in d and d["requeue"] is None and "signal" not in d
    assert opts(spec("preemption: false\nsbatch:\n  no-requeue: true\n"))["no-requeue"] is None


def test_srun_values_are_words_of_the_body_not_directives() -> None:
    words = step_words(spec('srun:\n  comment: "a hetjob\\tnote"\n'))
    assert "--comment=a hetjob\tnote" in words  # sbatch's directive rules (tabs, hetjob) are not srun's


def test_expedite_asks_for_an_expedited_requeue() -> None:
    """sbatch(1) of 25.11: `--requeue[=expedite]`, with preemption on or off."""
    assert opts(spec("recovery:\n  expedite: true\n"))["requeue"] == "expedite"
    off = opts(spec("preemption: false\nrecovery:\n  expedite: true\n"))
    assert off["requeue"] == "expedite" and "signal" not in off
    assert opts(spec("recovery: false\n"))["requeue"] is None  # no expedite without recovery
    from slurmgen.script.render import render

    script = render(spec("recovery:\n  expedite: true\n"))
    assert "#SBATCH --requeue='expedite'\n" in script and "#SBATCH --requeue\n" not in script
