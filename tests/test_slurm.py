"""The cluster profile, profiles/slurm: what it asks of a cluster, read from fake clusters, and
the dense graph run through a real single-node SLURM (slurmctld, slurmd, a fake GPU), whose
results must equal a local run's.

The real SLURM needs Debian's slurm-wlm and munge and root (`.ci/run` installs them); without them
the test is skipped, or fails when CI=true. ../shared/notes/slurm.md has the facts it rests on.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, scifact_subset, snakemake
from tiny_models import build_tiny_bi_encoder

PROFILE = REPO / "profiles" / "slurm"
DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sinfo", "sbatch", "squeue", "scontrol", "scancel", "munge", "unmunge")
# The SLURM run must finish well within CI's time; past this it is killed and fails.
RUN_TIMEOUT = 600
MARK = "# Written by irflow's tests/test_slurm.py; removed when the test ends.\n"


# --- The profile's settings, as snakemake reads them, on fake clusters -------------------------


def gpu_rules() -> set[str]:
    """The rules whose `resources:` declare a GPU."""
    found = set()
    for path in (REPO / "rules").rglob("*.smk"):
        for block in re.split(r"\n(?=rule \w+:)", path.read_text()):
            name = re.match(r"rule (\w+):", block)
            resources = re.search(r"\n    resources:\n((?:        .*\n)+)", block + "\n")
            if name and resources and re.search(r"\bgpu\s*=", resources.group(1)):
                found.add(name.group(1))
    # `use rule A as B` inherits A's resources.
    for path in (REPO / "rules").rglob("*.smk"):
        for base, name in re.findall(r"^use rule (\w+) as (\w+)", path.read_text(), re.M):
            if base in found:
                found.add(name)
    return found


def fake_cluster(folder: Path, sinfo: str, accounting: str = "accounting_storage/none") -> Path:
    """A bin folder whose sinfo and scontrol print what a cluster would."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {
        "sinfo": sinfo,
        "scontrol": f"AccountingStorageType   = {accounting}\nMinJobAge = 300 sec\n",
    }.items():
        (folder / name).write_text(f"#!/bin/sh\nexec /bin/cat <<'EOF'\n{text}EOF\n")
        (folder / name).chmod(0o755)
    return folder


def profile_settings(monkeypatch, bin_dir: Path | None, **env: str) -> dict:
    """The profile as snakemake parses it: option -> value, or -> {name: value} for resources."""
    from snakemake.profiles import ProfileConfigFileParser

    for name in [n for n in os.environ if n.startswith("IRFLOW_SLURM_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # Only the fake cluster's commands, or none at all.
    monkeypatch.setenv("PATH", str(bin_dir) if bin_dir else "/nonexistent")
    monkeypatch.delenv("IRFLOW_MAX_MEM_MB", raising=False)
    with (PROFILE / "config.v8+.yaml").open() as stream:
        parsed = ProfileConfigFileParser().parse(stream)
    # The cap the profile hands the rules' memory models (irflow.workflow.resources).
    settings = {"model-cap": os.environ.pop("IRFLOW_MAX_MEM_MB", None)}
    monkeypatch.undo()
    for key, value in parsed.items():
        if key in ("default-resources", "set-resources", "resources"):
            value = dict(item.split("=", 1) for item in value)
        settings[key] = value
    return settings


def partition_of(settings: dict, rule: str) -> str | None:
    """The partition a job of `rule` is sent to (None: the cluster's default)."""
    chosen = settings.get("set-resources", {}).get(f"{rule}:slurm_partition")
    chosen = chosen or settings["default-resources"].get("slurm_partition")
    return chosen and chosen.strip("'")


def gpus_of(settings: dict, rule: str) -> int:
    """How many GPUs a job of `rule` asks for, as the profile leaves its resources."""
    declared = 1 if rule in gpu_rules() else 0
    return int(settings.get("set-resources", {}).get(f"{rule}:gpu", declared))


# Partition | CPUs | MB | GRES | time limit, as `sinfo --format=%P|%c|%m|%G|%l` prints them.
GPU_CLUSTER = (
    "cpu*|4|8000|(null)|1-00:00:00\n"
    "gpu|16|64000|gpu:a100:2(S:0-1)|2:00:00\n"
    "gpu|2|32000|gpu:1|2:00:00\n"
    "long|64|512000|(null)|infinite\n"
)
# The test cluster below: one node with a GPU in both partitions.
SHARED_CLUSTER = "cpu*|2|12000|gpu:1|infinite\ngpu|2|12000|gpu:1|infinite\n"
CPU_CLUSTER = "batch*|2|6000|(null)|infinite\n"
# The memory of a job whose rule has no model: 4 GB, doubled with each attempt, capped.
MEM = "min(4000 * 2 ** (attempt - 1), {})"


@pytest.mark.parametrize(
    "sinfo, env",
    [(GPU_CLUSTER, {}), (SHARED_CLUSTER, {"IRFLOW_SLURM_GPU_PARTITION": "gpu"})],
    ids=["gpu-nodes", "shared-node"],
)
def test_every_rule_that_declares_a_gpu_goes_to_the_gpu_partition(
    monkeypatch, tmp_path, sinfo, env
):
    rules = gpu_rules()
    assert {"embed", "embed_shard", "rerank", "saliency"} <= rules
    settings = profile_settings(monkeypatch, fake_cluster(tmp_path / "bin", sinfo), **env)
    assert {key.split(":")[0] for key in settings["set-resources"]} == rules
    for rule in rules:
        assert partition_of(settings, rule) == "gpu", rule
        assert gpus_of(settings, rule) == 1, rule  # gpu=1 reaches SLURM, as --gpus=1
    for rule in ("ingest", "index", "retrieve_bm25", "score"):
        assert partition_of(settings, rule) == "cpu", rule
    # The plugin asks for the GPU itself; --gres in slurm_extra is refused.
    assert "slurm_extra" not in str(settings)


def test_with_several_gpu_partitions_the_profile_asks_which(monkeypatch, tmp_path):
    bin_dir = fake_cluster(tmp_path / "bin", SHARED_CLUSTER)
    with pytest.raises(SystemExit, match="cpu, gpu all have GPU nodes; set IRFLOW_SLURM_GPU_PAR"):
        profile_settings(monkeypatch, bin_dir)


def test_no_job_asks_for_more_than_a_node_has(monkeypatch, tmp_path):
    settings = profile_settings(monkeypatch, fake_cluster(tmp_path / "bin", GPU_CLUSTER))
    assert settings["executor"] == "slurm"
    # Threads: the fewest CPUs of a node in cpu or gpu. Memory and time: the least memory of a
    # node and the time limit of the partition the job goes to.
    assert settings["max-threads"] == "2"
    resources = settings["default-resources"]
    assert resources["mem_mb"] == MEM.format(8000)
    assert resources["runtime"] == "min(120 * 2 ** (attempt - 1), 1440)"
    resources = settings["set-resources"]
    assert resources["embed:runtime"] == "min(120 * 2 ** (attempt - 1), 120)"
    # The rules' own memory models are left to them, capped by the smallest node of cpu and gpu.
    assert not any(key.endswith(":mem_mb") for key in resources)
    assert settings["model-cap"] == "8000"
    assert partition_of(settings, "retrieve_bm25") == "cpu"
    # No accounting: squeue answers, sacct would not; no account is guessed.
    assert settings["slurm-status-command"] == "squeue"
    assert settings["slurm-no-account"] == "True"
    assert int(settings["slurm-init-seconds-before-status-checks"]) <= 10


def test_with_accounting_the_plugin_keeps_sacct_and_guesses_no_account(monkeypatch, tmp_path):
    bin_dir = fake_cluster(tmp_path / "bin", GPU_CLUSTER, accounting="accounting_storage/slurmdbd")
    settings = profile_settings(monkeypatch, bin_dir)
    assert "slurm-status-command" not in settings
    # No account guessed: SLURM charges the user's default account (or $SBATCH_ACCOUNT).
    assert settings["slurm-no-account"] == "True"
    settings = profile_settings(monkeypatch, bin_dir, IRFLOW_SLURM_ACCOUNT="proj1")
    assert settings["default-resources"]["slurm_account"] == "'proj1'"
    assert "slurm-no-account" not in settings


def test_a_cpu_only_cluster_runs_the_gpu_rules_without_a_gpu(monkeypatch, tmp_path):
    settings = profile_settings(monkeypatch, fake_cluster(tmp_path / "bin", CPU_CLUSTER))
    assert settings["max-threads"] == "2"
    for rule in gpu_rules():
        assert partition_of(settings, rule) == "batch" and gpus_of(settings, rule) == 0, rule
    # Without any SLURM command (a dry run on a laptop) the profile still parses.
    settings = profile_settings(monkeypatch, None)
    assert settings["max-threads"] == "8"
    assert all(gpus_of(settings, rule) == 0 for rule in gpu_rules())
    assert partition_of(settings, "embed") is None


def test_environment_variables_override_what_is_read_from_the_cluster(monkeypatch, tmp_path):
    bin_dir = fake_cluster(tmp_path / "bin", GPU_CLUSTER)
    env = {
        "IRFLOW_SLURM_PARTITION": "long",
        "IRFLOW_SLURM_GPU_PARTITION": "gpu",
        "IRFLOW_SLURM_MAX_THREADS": "6",
        "IRFLOW_SLURM_MAX_MEM_MB": "100000",
        "IRFLOW_SLURM_MAX_RUNTIME": "600",
        "IRFLOW_SLURM_STATUS_COMMAND": "sacct",
    }
    settings = profile_settings(monkeypatch, bin_dir, **env)
    assert partition_of(settings, "ingest") == "long"
    assert partition_of(settings, "embed") == "gpu"
    assert settings["max-threads"] == "6"
    resources = settings["default-resources"]
    assert resources["mem_mb"] == MEM.format(100000)
    assert settings["model-cap"] == "100000"
    assert resources["runtime"] == "min(120 * 2 ** (attempt - 1), 600)"
    assert settings["slurm-status-command"] == "sacct"
    settings = profile_settings(monkeypatch, bin_dir, IRFLOW_SLURM_GPU_PARTITION="none")
    assert partition_of(settings, "embed") == "cpu" and gpus_of(settings, "embed") == 0


# --- A real single-node SLURM -------------------------------------------------------------------


def _unavailable() -> str | None:
    """Why this machine cannot start a SLURM, or None."""
    missing = [
        name
        for name in (*DAEMONS, *COMMANDS)
        if shutil.which(name) is None and not Path("/usr/sbin", name).exists()
    ]
    if missing:
        return f"SLURM or munge is not installed (missing {', '.join(missing)}); see .ci/run"
    if os.geteuid() != 0:
        return "starting slurmctld and slurmd needs root"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed: pip install -e '.[slurm]'"
    return None


def _skip_unless_possible(reason: str | None) -> None:
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the SLURM test: {reason}")
    pytest.skip(reason)


def _daemon(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _munge_works() -> bool:
    munge = subprocess.run(["munge", "-n"], capture_output=True, check=False)
    if munge.returncode != 0:
        return False
    return subprocess.run(["unmunge"], input=munge.stdout, capture_output=True).returncode == 0


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def slurm_conf(folder: Path, host: str, ports: list[int]) -> str:
    cpus = os.cpu_count() or 1
    # At most what the machine has, or slurmd refuses the node; not enforced here anyway.
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    memory_mb = min(12000, int(memory_mb * 0.9))
    return f"""\
ClusterName=irflowtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MinJobAge=600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
NodeName={host} CPUs={cpus} RealMemory={memory_mb} Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running single-node SLURM with partitions cpu (default) and gpu, a fake GPU on its node
    and no accounting; yields the environment its commands need."""
    _skip_unless_possible(_unavailable())
    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    host = socket.gethostname().split(".")[0]
    gpu = Path("/dev/irflow-fakegpu0")
    made_gpu = not gpu.exists()
    if made_gpu:  # a copy of /dev/null; /dev/null itself where no device can be made
        made_gpu = subprocess.run(["mknod", str(gpu), "c", "1", "3"]).returncode == 0
        gpu = gpu if made_gpu else Path("/dev/null")
    # The default place: the plugin's job step drops SLURM_CONF from srun's environment.
    etc = Path("/etc/slurm")
    etc.mkdir(parents=True, exist_ok=True)
    for name in ("slurm.conf", "gres.conf"):
        if (etc / name).exists() and MARK not in (etc / name).read_text():
            _skip_unless_possible(f"{etc / name} configures another SLURM; not replacing it")
    (etc / "slurm.conf").write_text(MARK + slurm_conf(folder, host, _free_ports(2)))
    (etc / "gres.conf").write_text(f"{MARK}NodeName={host} Name=gpu File={gpu}\n")
    env = dict(os.environ)
    env.pop("SLURM_CONF", None)
    started: list[subprocess.Popen] = []
    try:
        if not _munge_works():
            run_dir = Path("/run/munge")
            run_dir.mkdir(parents=True, exist_ok=True)
            shutil.chown(run_dir, "munge", "munge")
            if not Path("/etc/munge/munge.key").exists():
                subprocess.run([_daemon("mungekey")], check=True)
                shutil.chown("/etc/munge/munge.key", "munge", "munge")
            started.append(
                subprocess.Popen(
                    ["runuser", "-u", "munge", "--", _daemon("munged"), "--foreground"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            _wait(_munge_works, 20, "munged did not answer")
        for command in ([_daemon("slurmctld"), "-D", "-i"], [_daemon("slurmd"), "-D"]):
            started.append(
                subprocess.Popen(
                    command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )

        def idle():
            sinfo = subprocess.run(
                ["sinfo", "--noheader", "--format=%T"], env=env, capture_output=True, text=True
            )
            return sinfo.returncode == 0 and set(sinfo.stdout.split()) == {"idle"}

        _wait(idle, 60, f"the node did not become idle; see {folder}/slurm*.log")
        # Both partitions hold the node's GPU: the profile would ask which one is meant.
        yield env | {"IRFLOW_SLURM_GPU_PARTITION": "gpu"}
    finally:
        subprocess.run(["scancel", "--full", "--user", "root"], env=env, capture_output=True)
        for process in reversed(started):
            _stop(process)
        for name in ("slurm.conf", "gres.conf"):
            (etc / name).unlink(missing_ok=True)
        if made_gpu:
            gpu.unlink(missing_ok=True)


def _wait(check, seconds: float, message: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(message)
        time.sleep(0.5)


def run_snakemake(workdir: Path, config: dict, *args: str, env: dict | None = None) -> str:
    """snakemake in its own process group, killed (with the jobs it waits on) past
    RUN_TIMEOUT: a run waiting on SLURM ignores SIGTERM."""
    env = (env or os.environ) | {"HF_HUB_OFFLINE": "1"}
    return snakemake(workdir, *args, config=config, cores=None, env=env, timeout=RUN_TIMEOUT).output


def slurm_jobs(output: str, env: dict) -> list[dict]:
    """The SLURM jobs of a run (named by the run ID the plugin logs), as `scontrol show job`
    describes them, with the rule each ran (from the comment the plugin gives it)."""
    run_id = re.search(r"SLURM run ID: (\S+)", output)[1]
    shown = subprocess.run(
        ["scontrol", "show", "job", "--details", "--oneliner"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = []
    for line in shown.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if fields.get("JobName") == run_id:
            fields["rule"] = re.match(r"rule_(\w+?)(?:_wildcards_.*)?$", fields["Comment"])[1]
            jobs.append(fields)
    return jobs


def dense_config(data: Path, model: Path) -> dict:
    return {
        "offline": True,
        "datasets": {"sub": {"source": {"type": "path", "path": str(data)}}},
        "models": {"tiny": {"id": str(model)}},
        "retrievers": {"bm25": {"type": "bm25"}, "tiny": {"type": "dense", "model": "tiny"}},
        "metrics": ["ndcg_cut.10", "recall.100"],
        "report_metrics": ["ndcg_cut_10", "recall_100"],
    }


# The runs of both systems: few waves of jobs (each pays SLURM's and the plugin's latency).
TARGETS = ["results/runs/sub/bm25.parquet", "results/runs/sub/tiny.parquet"]


QUERY_VECTORS = "results/embeddings/sub/tiny/queries.parquet"


def slurm_run(workdir: Path, config: dict, env: dict, *args: str) -> str:
    # The plugin checks a wave of jobs this many seconds after submitting it, then 10 s later
    # than the last time while none has finished (1, 12, 33 s...): a job of this small graph
    # takes 5-7 s, so 1 s makes its wave 12 s long (2 s: 14 s).
    return run_snakemake(
        workdir,
        config,
        "--profile",
        str(PROFILE),
        "--slurm-init-seconds-before-status-checks",
        "1",
        *args,
        env=env,
    )


@pytest.fixture(scope="module")
def slurm_runs(slurm, tmp_path_factory, shared_datasets, minilm_path):
    """The same config run through SLURM with the profile and, beside it (the SLURM run mostly
    waits), locally; then, in a copy of the local run, embed again through SLURM with
    IRFLOW_SLURM_GPU_PARTITION=none."""
    root = tmp_path_factory.mktemp("slurm-runs")
    data = scifact_subset(shared_datasets / "scifact", root / "data", 20, 100)
    # A random two-layer encoder: what is checked is where jobs ran and that the results agree,
    # and its jobs end within the plugin's first status checks (MiniLM's embed missed them).
    config = dense_config(data, build_tiny_bi_encoder(root / "tiny", minilm_path))
    local, cluster, no_gpu = root / "local", root / "cluster", root / "no-gpu"
    local.mkdir()
    cluster.mkdir()

    def local_then_no_gpu():
        # As many threads as the SLURM jobs get (the node's CPUs), so the vectors compare.
        run_snakemake(local, config, "--cores", str(os.cpu_count()), *TARGETS)
        shutil.copytree(local, no_gpu, symlinks=True)
        no_gpu_env = slurm | {"IRFLOW_SLURM_GPU_PARTITION": "none"}
        return slurm_run(no_gpu, config, no_gpu_env, "--forcerun=embed", "--", QUERY_VECTORS)

    with ThreadPoolExecutor(1) as pool:
        beside = pool.submit(local_then_no_gpu)
        started = time.monotonic()
        output = slurm_run(cluster, config, slurm, *TARGETS)
        print(f"SLURM run: {time.monotonic() - started:.0f} s")
        no_gpu_output = beside.result()
    return SimpleNamespace(
        local=local, cluster=cluster, no_gpu=no_gpu, output=output, no_gpu_output=no_gpu_output
    )


@pytest.mark.e2e
def test_every_job_ran_as_a_slurm_job_and_embed_got_a_gpu(slurm, slurm_runs):
    jobs = slurm_jobs(slurm_runs.output, slurm)
    rules = sorted(job["rule"] for job in jobs)
    assert rules == sorted(
        ["download", "ingest", "filter", "embed", "index"]  # embed: documents and queries
        + ["index_bm25", "retrieve_bm25", "retrieve_dense"]
    ), rules
    cpus = str(min(8, os.cpu_count() or 1))  # the rules' 8 threads, capped to the node's CPUs
    # The memory BM25's models ask for its corpus and its saved index
    # (irflow.workflow.resources), not a default.
    from irflow.workflow.resources import bm25_mb, bm25_search_mb

    results = slurm_runs.cluster / "results/datasets/sub"
    bm25_mem = {
        "index_bm25": bm25_mb(results / "filtered/corpus.parquet"),
        "retrieve_bm25": bm25_search_mb(
            slurm_runs.cluster / "results/indexes/sub/bm25.bm25s",
            results / "filtered/queries.parquet",
            1000,
        ),
    }
    for job in jobs:
        assert job["JobState"] == "COMPLETED", job
        gpu = job["rule"] == "embed"
        assert job["Partition"] == ("gpu" if gpu else "cpu"), job
        # A GPU is asked for once (--gpus=1) and allocated, only to embed.
        assert job["JOB_GRES"] == ("gpu:1" if gpu else "(null)"), job
        assert job.get("TresPerJob") == ("gres:gpu:1" if gpu else None), job
        assert "TresPerNode" not in job, job  # no --gres beside --gpus
        if job["rule"] in ("embed", "index", "retrieve_dense"):
            assert job["NumCPUs"] == cpus, job
        if job["rule"] in bm25_mem:
            assert job["NumCPUs"] == "1", job  # single-threaded BM25 asks one CPU
            assert _mib(job["MinMemoryNode"]) == bm25_mem[job["rule"]], job
    assert "--gres" not in slurm_runs.output


def _mib(memory: str) -> int:
    """scontrol's memory (1024M, 1G, 1.50G) in MiB."""
    number, unit = re.fullmatch(r"([\d.]+)([KMGT])", memory).groups()
    return round(float(number) * 1024 ** "KMGT".index(unit) / 1024)


def _run_table(workdir: Path, system: str) -> pd.DataFrame:
    table = pd.read_parquet(workdir / "results" / "runs" / "sub" / f"{system}.parquet")
    return table.sort_values(["query_id", "rank"]).reset_index(drop=True)


@pytest.mark.e2e
def test_the_slurm_run_retrieves_as_a_local_run(slurm_runs):
    local, cluster = slurm_runs.local, slurm_runs.cluster
    pd.testing.assert_frame_equal(_run_table(cluster, "bm25"), _run_table(local, "bm25"))
    here, there = _run_table(cluster, "tiny"), _run_table(local, "tiny")
    assert len(here) > 0 and here["query_id"].nunique() == 20
    pd.testing.assert_frame_equal(here.drop(columns="score"), there.drop(columns="score"))
    assert (here["score"] - there["score"]).abs().max() < 1e-6


@pytest.mark.e2e
def test_without_a_gpu_partition_embed_asks_for_no_gpu(slurm, slurm_runs):
    [job] = slurm_jobs(slurm_runs.no_gpu_output, slurm)
    assert job["rule"] == "embed" and job["JobState"] == "COMPLETED"
    assert job["Partition"] == "cpu"
    assert job["JOB_GRES"] == "(null)" and "TresPerJob" not in job
    here = pd.read_parquet(slurm_runs.no_gpu / QUERY_VECTORS)
    there = pd.read_parquet(slurm_runs.local / QUERY_VECTORS)
    assert list(here["id"]) == list(there["id"])
    difference = np.abs(np.stack(here["vector"]) - np.stack(there["vector"]))
    assert difference.max() < 1e-6
