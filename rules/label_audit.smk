# label_audit: the proposed judgements and Hole@k before/after under results/audit/<dataset>/,
# from the votes of rules/qc.smk's audit_votes. label_audit_summary: every audited dataset's
# summary, for the report.

from irflow.derived.llm.client import answer_settings


rule label_audit:
    input:
        unpack(plan.label_audit_inputs),
    output:
        candidates="results/audit/{dataset}/candidates.parquet",
        trec="results/audit/{dataset}/candidate_qrels.trec",
        csv="results/audit/{dataset}/candidates.csv",
        hole="results/audit/{dataset}/hole.parquet",
        summary="results/audit/{dataset}/summary.parquet",
        manifest="results/manifests/label_audit/{dataset}.json",
    log:
        "results/logs/label_audit/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(plan.audited),
    conda:
        "../envs/generate.yaml"
    params:
        audit=config["quality_control"]["label_audit"],
        systems=plan.audit_systems(),
        rerankers=plan.qc_rerankers,
        majority=config["quality_control"]["majority"],
        judge=config["quality_control"]["judge"],
        llm=(
            answer_settings(config["llm"])
            if plan.audited and config["quality_control"]["label_audit"]["judge"]
            else {}
        ),
    script:
        "../scripts/label_audit.py"


rule label_audit_summary:
    input:
        summaries=expand(
            "results/audit/{dataset}/summary.parquet", dataset=plan.audited
        ),
    output:
        summary="results/label_audit.parquet",
        table=report(
            "results/report/label_audit_table.html",
            caption="../report/label_audit_table.rst",
            category="Tables",
        ),
    log:
        "results/logs/label_audit_summary.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/label_audit_summary.py"
