"""irflow.workflow.slurm_profile and irflow.workflow.rule_directives, which profiles/slurm calls:
recorded `sinfo` and `scontrol` outputs in, the profile's options out; and the rules that ask for
a GPU, read from a workflow's `resources:`. tests/test_slurm.py reads the profile itself through
Snakemake, on fake clusters and on a real one."""

from __future__ import annotations

import os

import pytest
from conftest import REPO

from irflow.core.errors import InputError
from irflow.workflow import slurm_profile
from irflow.workflow.rule_directives import rules_declaring, workflow_rules
from irflow.workflow.slurm_profile import keeps_no_accounting, minutes, parse_sinfo, settings

# As `sinfo --noheader --format=%P|%c|%m|%G|%l` prints them: a default CPU partition, a GPU
# partition with two kinds of node, one with no time limit.
CLUSTER = (
    "cpu*|4|8000|(null)|1-00:00:00\n"
    "gpu|16|64000|gpu:a100:2(S:0-1)|2:00:00\n"
    "gpu|2|32000|gpu:1|2:00:00\n"
    "long|64|512000|(null)|infinite\n"
)
SCONTROL_NO_ACCOUNTING = "AccountingStorageType   = accounting_storage/none\nMinJobAge = 300 sec\n"
SCONTROL_SLURMDBD = "AccountingStorageType   = accounting_storage/slurmdbd\n"
GPU_RULES = ["embed", "rerank"]


def profile(sinfo=CLUSTER, scontrol=SCONTROL_NO_ACCOUNTING, **environ):
    return settings(parse_sinfo(sinfo), keeps_no_accounting(scontrol), environ, GPU_RULES)


@pytest.mark.parametrize(
    "limit, expected",
    [
        ("30", 30),
        ("1:30", 2),  # minutes:seconds, the seconds rounded up
        ("2:00:00", 120),
        ("1-00:00:00", 24 * 60),
        ("7-12:00:00", 7 * 24 * 60 + 12 * 60),
        ("2-3", 2 * 24 * 60 + 3),
        ("infinite", None),
        ("UNLIMITED", None),
        ("n/a", None),
        ("x-1:00:00", None),
    ],
)
def test_time_limits_are_read_in_minutes(limit, expected):
    assert minutes(limit) == expected


def test_each_partition_has_its_nodes_and_gres_forms_mark_gpus():
    partitions = parse_sinfo(
        CLUSTER + "mps|8|16000|mps:100,gpu:v100:4|30:00\nbad line\nshard|8|16000|gpushard:2|1\n"
    )
    assert list(partitions) == ["cpu", "gpu", "long", "mps", "shard"]
    assert partitions["cpu"].default and not partitions["gpu"].default
    assert partitions["gpu"].cpus == [16, 2] and partitions["gpu"].mem == [64000, 32000]
    assert partitions["gpu"].time == [120, 120] and partitions["long"].time == [None]
    assert {name for name, p in partitions.items() if p.gpu} == {"gpu", "mps"}
    # A `+` marks nodes of one line that differ (sinfo's --format without -N).
    assert parse_sinfo("a*|8+|16000+|(null)|1\n")["a"].cpus == [8]


def test_the_gpu_rules_go_to_the_one_gpu_partition_and_the_rest_to_the_default():
    chosen = profile()
    assert chosen.default_resources == {
        "mem_mb": "min(4000 * 2 ** (attempt - 1), 8000)",
        "runtime": "min(120 * 2 ** (attempt - 1), 1440)",
        "slurm_partition": "'cpu'",
    }
    assert chosen.set_resources == {
        rule: {"runtime": "min(120 * 2 ** (attempt - 1), 120)", "slurm_partition": "'gpu'"}
        for rule in GPU_RULES
    }
    # The fewest CPUs and the least memory of a node of either partition.
    assert chosen.max_threads == 2 and chosen.model_cap_mb == 8000
    assert chosen.status_command == "squeue" and chosen.account == ""


def test_two_gpu_partitions_stop_and_ask_which():
    sinfo = CLUSTER + "gpu2|8|16000|gpu:h100:8|1:00:00\n"
    with pytest.raises(SystemExit, match="partitions gpu, gpu2 all have GPU nodes; set IRFLOW_"):
        profile(sinfo)
    assert profile(sinfo, IRFLOW_SLURM_GPU_PARTITION="gpu2").set_resources["embed"] == {
        "runtime": "min(120 * 2 ** (attempt - 1), 60)",
        "slurm_partition": "'gpu2'",
    }


def test_without_a_gpu_partition_the_gpu_rules_ask_for_no_gpu(capsys):
    chosen = profile("batch*|2|6000|(null)|infinite\n")
    assert chosen.set_resources == {rule: {"gpu": 0} for rule in GPU_RULES}
    assert chosen.default_resources["runtime"] == "120 * 2 ** (attempt - 1)"  # no limit
    assert "no partition has GPU nodes" in capsys.readouterr().err
    # `none` turns the GPU off on a cluster that has one, without a warning.
    assert profile(IRFLOW_SLURM_GPU_PARTITION="none").set_resources["rerank"] == {"gpu": 0}
    assert capsys.readouterr().err == ""


def test_without_sinfo_nothing_is_capped():
    chosen = profile(sinfo="", scontrol="")
    assert chosen.max_threads == 8 and chosen.model_cap_mb is None
    assert chosen.default_resources == {
        "mem_mb": "4000 * 2 ** (attempt - 1)",
        "runtime": "120 * 2 ** (attempt - 1)",
    }
    assert chosen.status_command == ""  # sacct: no answer from scontrol says nothing


def test_environment_variables_override_what_is_read_from_the_cluster():
    chosen = profile(
        scontrol=SCONTROL_SLURMDBD,
        IRFLOW_SLURM_PARTITION="long",
        IRFLOW_SLURM_MAX_THREADS="3",
        IRFLOW_SLURM_MAX_MEM_MB="5000",
        IRFLOW_SLURM_MAX_RUNTIME="77",
        IRFLOW_SLURM_ACCOUNT=" proj1 ",
        IRFLOW_SLURM_STATUS_COMMAND="sacct",
    )
    assert chosen.default_resources == {
        "mem_mb": "min(4000 * 2 ** (attempt - 1), 5000)",
        "runtime": "min(120 * 2 ** (attempt - 1), 77)",
        "slurm_partition": "'long'",
        "slurm_account": "'proj1'",
    }
    assert chosen.max_threads == 3 and chosen.model_cap_mb == 5000
    assert chosen.status_command == "sacct" and chosen.account == "proj1"
    # With accounting, the plugin keeps sacct.
    assert profile(scontrol=SCONTROL_SLURMDBD).status_command == ""


def test_from_cluster_reads_the_commands_and_hands_the_memory_cap_on(monkeypatch):
    outputs = {"sinfo": CLUSTER, "scontrol": SCONTROL_NO_ACCOUNTING}
    monkeypatch.setattr(slurm_profile, "cluster_output", lambda command: outputs[command[0]])
    monkeypatch.setattr(slurm_profile, "rules_declaring", lambda resource: GPU_RULES)
    monkeypatch.delenv("IRFLOW_MAX_MEM_MB", raising=False)
    for name in [n for n in os.environ if n.startswith("IRFLOW_SLURM_")]:
        monkeypatch.delenv(name)
    assert slurm_profile.from_cluster() == profile()
    assert os.environ["IRFLOW_MAX_MEM_MB"] == "8000"


def test_the_gpu_rules_are_read_from_the_rules_resources(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "Snakefile").write_text(
        'include: "rules/a.smk"\n\n\nif config.get("more"):\n\n    include: "rules/b.smk"\n'
    )
    (tmp_path / "rules" / "a.smk").write_text(
        "rule encode:\n"
        "    output:\n        'x'\n"
        "    conda:\n        '../envs/models.yaml'\n"
        "    resources:\n        mem_mb=100,\n        gpu=1,\n"
        "    script:\n        '../scripts/encode.py'\n\n\n"
        "use rule encode as encode_shard with:\n    output:\n        'y'\n\n\n"
        "use rule encode as encode_cpu with:\n    resources:\n        gpu=0,\n\n\n"
        "rule count:\n    output:\n        'z'\n    shell:\n        'gpu=1 true'\n"
    )
    (tmp_path / "rules" / "b.smk").write_text(
        "rule judge:\n    output:\n        'w'\n"
        "    conda:\n        env_of\n"
        "    resources:\n        gpu=lambda wc: int(wc.x == 'dense'),\n"
        "    shell:\n        'true'\n"
    )
    snakefile = tmp_path / "Snakefile"
    assert rules_declaring("gpu", snakefile) == ["encode", "encode_shard", "judge"]
    rules = workflow_rules(snakefile)
    assert set(rules) == {"encode", "encode_shard", "encode_cpu", "count", "judge"}
    assert rules["encode_shard"].conda == "../envs/models.yaml"
    assert rules["encode_shard"].script == "../scripts/encode.py"
    assert rules["encode_shard"].path(rules["encode_shard"].conda) == (
        tmp_path / "envs" / "models.yaml"
    )
    assert rules["judge"].conda == "env_of"  # an expression, as written


def test_the_workflow_s_gpu_rules_include_the_model_stages():
    gpu_rules = rules_declaring("gpu")
    assert {"embed", "embed_shard", "encode_vectors", "rerank", "saliency"} <= set(gpu_rules)
    assert not {"ingest", "index", "retrieve_bm25", "score"} & set(gpu_rules)
    assert workflow_rules()["embed"].snakefile == REPO / "rules" / "embed.smk"


def test_a_missing_snakefile_says_what_to_install(tmp_path):
    with pytest.raises(InputError, match="install irflow from the checkout"):
        rules_declaring("gpu", tmp_path / "Snakefile")
