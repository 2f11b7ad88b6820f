# qc: AIR-Bench's quality control of generated datasets, and the label audit of any dataset.
# qc_candidates: the retriever's top `depth` for the queries of a checked split other than the
# scored one, which the retriever's run does not cover (retrieved as the negatives job
# retrieves another split). qc_votes / audit_votes: each voting reranker's ranking of a query's
# candidates (a generated dataset's top `depth` of a retriever's run and, reranked apart, of
# qc_candidates; an audited dataset's pool of every system's top `depth`). quality_control: the judge and Table 2, over every checked split -> a new dataset
# under results/datasets/<name>/ (qrels/<split>.parquet each, an unchecked split empty) and its
# audit under results/qc/<name>/. label_audit: the proposed
# judgements and Hole@k before/after under results/audit/<dataset>/.

from irflow.derived.generate.dataset import SPLITS
from irflow.derived.llm.client import answer_settings
from irflow.workflow.families import family


include: "qc_common.smk"


# The QC'd copies' datasets and inputs are their kind's (irflow.workflow.kinds.quality_control).
QUALITY_CONTROL = plan.kinds["quality_control"]


rule qc_candidates:
    input:
        unpack(QUALITY_CONTROL.candidates_inputs),
    output:
        run="results/qc/{dataset}/candidates/{split}.parquet",
        manifest="results/manifests/qc_candidates/{dataset}/{split}.json",
    log:
        "results/logs/qc_candidates/{dataset}/{split}.log",
    wildcard_constraints:
        dataset=one_of(QUALITY_CONTROL.datasets),
        split=one_of(SPLITS),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=lambda wc: int(
            family(plan.retrievers[QUALITY_CONTROL.spec(wc)["retriever"]]["type"]).gpu
        ),
    params:
        retrieval=QUALITY_CONTROL.candidates_retrieval,
    script:
        "../scripts/qc_candidates.py"


rule qc_votes:
    input:
        unpack(QUALITY_CONTROL.votes_inputs),
    output:
        votes="results/qc/{dataset}/votes/{reranker}.parquet",
        manifest="results/manifests/qc_votes/{dataset}/{reranker}.json",
    log:
        "results/logs/qc_votes/{dataset}/{reranker}.log",
    wildcard_constraints:
        dataset=one_of(QUALITY_CONTROL.datasets),
        reranker=one_of(plan.qc_rerankers),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
    params:
        depth=lambda wc: QUALITY_CONTROL.spec(wc)["depth"],
        settings=lambda wc: reranker_settings(wc.reranker),
    script:
        "../scripts/qc_votes.py"


rule audit_votes:
    input:
        unpack(plan.audit_votes_inputs),
    output:
        votes="results/audit/{dataset}/votes/{reranker}.parquet",
        manifest="results/manifests/audit_votes/{dataset}/{reranker}.json",
    log:
        "results/logs/audit_votes/{dataset}/{reranker}.log",
    wildcard_constraints:
        dataset=one_of(plan.audited),
        reranker=one_of(plan.qc_rerankers),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
    params:
        depth=config["quality_control"]["label_audit"]["depth"],
        settings=lambda wc: reranker_settings(wc.reranker),
    script:
        "../scripts/qc_votes.py"


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
