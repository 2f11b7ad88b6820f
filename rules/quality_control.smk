# quality_control: the judge and Table 2 (AIR-Bench's quality control), over every checked split
# of a generated dataset -> a new dataset under results/datasets/<name>/ (qrels/<split>.parquet
# each, an unchecked split empty) and its audit under results/qc/<name>/; its candidates and
# votes come from rules/qc.smk. quality_control_summary: every audit's table, for the report.

from irflow.derived.llm.client import answer_settings


rule quality_control:
    input:
        unpack(QUALITY_CONTROL.inputs),
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        qrels_dev="results/datasets/{dataset}/qrels/dev.parquet",
        qrels_test="results/datasets/{dataset}/qrels/test.parquet",
        stats="results/datasets/{dataset}/stats.json",
        audit="results/qc/{dataset}/audit.parquet",
        manifest="results/manifests/quality_control/{dataset}.json",
    log:
        "results/logs/quality_control/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(QUALITY_CONTROL.datasets),
    conda:
        "../envs/generate.yaml"
    params:
        spec=QUALITY_CONTROL.spec,
        rerankers=plan.qc_rerankers,
        majority=config["quality_control"]["majority"],
        judge=config["quality_control"]["judge"],
        # Only what changes the answers: a new address, concurrency or timeout reruns nothing.
        llm=answer_settings(config["llm"]) if QUALITY_CONTROL.datasets else {},
    script:
        "../scripts/quality_control.py"


rule quality_control_summary:
    input:
        audits=expand(
            "results/qc/{dataset}/audit.parquet", dataset=QUALITY_CONTROL.datasets
        ),
    output:
        summary="results/quality_control.parquet",
        table=report(
            "results/report/quality_control_table.html",
            caption="../report/quality_control_table.rst",
            category="Tables",
        ),
    log:
        "results/logs/quality_control_summary.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/quality_control_summary.py"
