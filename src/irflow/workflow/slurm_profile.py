"""slurm_profile: what the jobs of profiles/slurm ask of a cluster, read from the cluster.

The profile (profiles/slurm/config.v8+.yaml, documented there and in docs/cluster.md) calls
`from_cluster` when Snakemake reads it: the partitions' nodes from `sinfo`, whether the cluster
keeps accounting from `scontrol show config`, the overrides from the IRFLOW_SLURM_* environment
variables and the rules that ask for a GPU from the workflow's own `resources:` declarations
(irflow.workflow.rule_directives). `settings` is the same without the commands, for the tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from irflow.workflow.rule_directives import rules_declaring

# `sinfo --format` fields, one line per partition and kind of node: name (`*` marks the default
# partition), CPUs, memory in MB, GRES, time limit.
SINFO = ("sinfo", "--noheader", "--format=%P|%c|%m|%G|%l")
SCONTROL = ("scontrol", "show", "config")
# A job asks for 4 GB and 2 hours when its rule has no model, doubled with each attempt.
DEFAULT_MEM_MB = 4000
DEFAULT_RUNTIME_MIN = 120
# The rules ask for up to 8 threads.
MAX_THREADS = 8


@dataclass
class Partition:
    """What the nodes of one partition have, a value per kind of node."""

    default: bool
    cpus: list[int] = field(default_factory=list)
    mem: list[int] = field(default_factory=list)
    time: list[int | None] = field(default_factory=list)  # minutes; None: infinite
    gpu: bool = False


@dataclass
class ProfileSettings:
    """The profile's options, as Snakemake's resource expressions where they are resources."""

    max_threads: int
    default_resources: dict[str, object]
    set_resources: dict[str, dict[str, object]]
    # slurm-status-command; "": the plugin's own choice (sacct).
    status_command: str
    # IRFLOW_SLURM_ACCOUNT; "": none is given, so SLURM charges the user's default account.
    account: str
    # The cap of the rules' memory models (IRFLOW_MAX_MEM_MB); None: unknown, no cap.
    model_cap_mb: int | None


def minutes(limit: str) -> int | None:
    """sinfo's time limit ([days-]hours:minutes:seconds, minutes, infinite) in minutes (None:
    infinite, or unreadable). Seconds round up: a job asking for less would be cut short."""
    days, _, clock = limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")] if re.fullmatch(r"[\d:]+", clock) else []
    if not parts or (days and not days.isdigit()):
        return None
    if len(parts) == 1:
        clock_minutes = parts[0]
    else:
        hours, mins, secs = ([0] * 3 + parts)[-3:]
        clock_minutes = hours * 60 + mins + (secs > 0)
    return int(days or 0) * 24 * 60 + clock_minutes


def _number(text: str) -> int:
    """The leading number of a sinfo field (`64000+` on mixed nodes), 0 when there is none."""
    return int(re.match(r"\d*", text).group() or 0)


def parse_sinfo(text: str) -> dict[str, Partition]:
    """The partitions in the output of `sinfo --format=%P|%c|%m|%G|%l` (SINFO)."""
    partitions: dict[str, Partition] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        name, cpus, mem, gres, limit = fields
        entry = partitions.setdefault(name.rstrip("*"), Partition(default=name.endswith("*")))
        entry.cpus.append(_number(cpus))
        entry.mem.append(_number(mem))
        entry.gpu |= bool(re.search(r"(^|,)gpu([:(]|$)", gres))  # gpu:1, gpu:a100:2(S:0-1)
        entry.time.append(minutes(limit))
    return partitions


def keeps_no_accounting(scontrol: str) -> bool:
    """Whether `scontrol show config` says the cluster keeps no accounting: sacct then answers
    nothing, and a run that asked it for the jobs' states would wait forever."""
    return "accounting_storage/none" in scontrol


def _scaled(base: int, cap: int | None) -> str:
    """A resource expression: base, doubled with each attempt, at most cap."""
    grown = f"{base} * 2 ** (attempt - 1)"
    return f"min({grown}, {cap})" if cap else grown


def settings(
    partitions: Mapping[str, Partition],
    no_accounting: bool,
    environ: Mapping[str, str],
    gpu_rules: Iterable[str],
) -> ProfileSettings:
    """The profile's options for a cluster of `partitions`, with the IRFLOW_SLURM_* overrides
    of `environ`. Exits asking for IRFLOW_SLURM_GPU_PARTITION when several partitions have GPU
    nodes: the GPU partition is never guessed."""

    def env(name: str) -> str:
        return environ.get(name, "").strip()

    def cap(variable: str, key: str, names: set[str]) -> int | None:
        """The override, or the least of `key` over the partitions' nodes (None: unknown)."""
        if env(variable):
            return int(env(variable))
        values = [v for p in names if p in partitions for v in getattr(partitions[p], key) if v]
        return min(values) if values else None

    def resources(partition: str) -> dict[str, object]:
        """Time that fits the partition's limit, and the partition."""
        chosen = {
            "runtime": _scaled(
                DEFAULT_RUNTIME_MIN, cap("IRFLOW_SLURM_MAX_RUNTIME", "time", {partition})
            )
        }
        if partition:
            chosen["slurm_partition"] = repr(partition)
        return chosen

    cpu_partition = env("IRFLOW_SLURM_PARTITION") or next(
        (name for name, entry in partitions.items() if entry.default), ""
    )
    gpu_partition = gpu_partition_of(partitions, env("IRFLOW_SLURM_GPU_PARTITION"))
    # Threads are capped for every rule alike (--max-threads): by the smaller nodes of both.
    threads = cap("IRFLOW_SLURM_MAX_THREADS", "cpus", {cpu_partition, gpu_partition})
    # A rule without a memory model (none of them holds a corpus-sized structure) asks 4 GB.
    default_resources = {
        "mem_mb": _scaled(DEFAULT_MEM_MB, cap("IRFLOW_SLURM_MAX_MEM_MB", "mem", {cpu_partition})),
        **resources(cpu_partition),
    }
    if env("IRFLOW_SLURM_ACCOUNT"):
        default_resources["slurm_account"] = repr(env("IRFLOW_SLURM_ACCOUNT"))
    # The rules that declare `resources: gpu=1` go to the GPU partition; without one, gpu=0, so
    # that neither sbatch nor the job's srun asks for a GPU.
    if gpu_partition:
        set_resources = {rule: resources(gpu_partition) for rule in gpu_rules}
    else:
        set_resources = {rule: {"gpu": 0} for rule in gpu_rules}
    return ProfileSettings(
        max_threads=min(MAX_THREADS, threads or MAX_THREADS),
        default_resources=default_resources,
        set_resources=set_resources,
        status_command=env("IRFLOW_SLURM_STATUS_COMMAND") or ("squeue" if no_accounting else ""),
        account=env("IRFLOW_SLURM_ACCOUNT"),
        # The rules' own models (irflow.workflow.resources) grow per attempt and stop at this
        # cap: a node of the partitions the jobs go to must hold the request, or SLURM refuses it.
        model_cap_mb=cap("IRFLOW_SLURM_MAX_MEM_MB", "mem", {cpu_partition, gpu_partition}),
    )


def gpu_partition_of(partitions: Mapping[str, Partition], override: str) -> str:
    """The GPU rules' partition: the override, else the one partition with GPU nodes; ""
    when none has (or the override is `none`): those rules then run on the CPU."""
    with_gpus = sorted(name for name, entry in partitions.items() if entry.gpu)
    if not override and len(with_gpus) > 1:
        sys.exit(
            f"profiles/slurm: partitions {', '.join(with_gpus)} all have GPU nodes; set "
            "IRFLOW_SLURM_GPU_PARTITION to the one for the GPU rules (or to none: no GPU)"
        )
    if not override and partitions and not with_gpus:
        print(
            "profiles/slurm: no partition has GPU nodes (a `gpu` GRES); the GPU rules run on "
            "the CPU. Set IRFLOW_SLURM_GPU_PARTITION to send them to a partition.",
            file=sys.stderr,
        )
    chosen = override or "".join(with_gpus)
    return "" if chosen == "none" else chosen


def cluster_output(command: tuple[str, ...]) -> str:
    """What a SLURM command prints; "" where it is missing or fails (no cluster is read)."""
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def from_cluster() -> ProfileSettings:
    """The profile's options for the cluster that the SLURM commands on PATH reach. Sets
    IRFLOW_MAX_MEM_MB, the cap the rules' memory models read (irflow.workflow.resources)."""
    chosen = settings(
        parse_sinfo(cluster_output(SINFO)),
        keeps_no_accounting(cluster_output(SCONTROL)),
        os.environ,
        rules_declaring("gpu"),
    )
    if chosen.model_cap_mb:
        os.environ["IRFLOW_MAX_MEM_MB"] = str(chosen.model_cap_mb)
    return chosen
