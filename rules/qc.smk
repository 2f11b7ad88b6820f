# qc: the candidates and votes of AIR-Bench's quality control of generated datasets
# (rules/quality_control.smk) and of the label audit of any dataset (rules/label_audit.smk).
# qc_candidates: the retriever's top `depth` for the queries of a checked split other than the
# scored one, which the retriever's run does not cover (retrieved as the negatives job
# retrieves another split). qc_votes / audit_votes: each voting reranker's ranking of a query's
# candidates (a generated dataset's top `depth` of a retriever's run and, reranked apart, of
# qc_candidates; an audited dataset's pool of every system's top `depth`).

from irflow.derived.generate.dataset import SPLITS
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
