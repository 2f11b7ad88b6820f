# Input functions and settings of rules/qc.smk (quality control and the label audit).

from irflow.derived.generate.dataset import checked_splits
from irflow.retrieval.rerankers import reranker_settings as scoring_settings


def qc_spec(wildcards):
    return plan.quality_controlled[wildcards.dataset]


def reranker_settings(reranker):
    return scoring_settings(config, reranker)


def candidate_texts(dataset):
    base = f"results/datasets/{dataset}"
    return {
        "source": f"{base}/source.json",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    }


def qc_other_splits(name):
    """The checked splits of QC'd copy ``name`` that the retriever's run does not cover (it
    retrieves the scored split's queries only): qc_candidates retrieves them. A split the
    generation leaves empty (dev_share 0 or 1) has no queries to retrieve."""
    spec = plan.quality_controlled[name]
    generated = plan.generated[spec["dataset"]]
    empty = {0: "dev", 1: "test"}.get(generated["dev_share"])
    return [
        split
        for split in checked_splits(spec)
        if split not in (generated["split"], empty)
    ]


def qc_candidates_retrieval(wildcards):
    spec = qc_spec(wildcards)
    return plan.split_retrieval(spec["dataset"], spec["retriever"], spec["depth"])


def qc_candidates_inputs(wildcards):
    """The split's queries and judgements, and what the retriever searches with."""
    spec = qc_spec(wildcards)
    base = f"results/datasets/{spec['dataset']}"
    return {
        "source": f"{base}/source.json",
        "queries": f"{base}/queries.parquet",
        "qrels": f"{base}/qrels/{wildcards.split}.parquet",
    } | plan.split_retrieval_files(spec["dataset"], spec["retriever"])


def qc_votes_inputs(wildcards):
    generated = qc_spec(wildcards)["dataset"]
    retriever = qc_spec(wildcards)["retriever"]
    others = qc_other_splits(wildcards.dataset)
    runs = {"runs": [f"results/runs/{generated}/{retriever}.parquet"]}
    texts = candidate_texts(generated)
    if others:  # the filtered queries are the scored split's only
        texts["queries"] = f"results/datasets/{generated}/queries.parquet"
        runs["split_runs"] = [
            f"results/qc/{wildcards.dataset}/candidates/{split}.parquet"
            for split in others
        ]
    return texts | runs | plan.reranker_embeddings(generated, wildcards.reranker)


def audit_systems():
    return config["quality_control"]["label_audit"]["systems"] or plan.systems


def audit_votes_inputs(wildcards):
    return (
        candidate_texts(wildcards.dataset)
        | {
            "runs": [
                f"results/runs/{wildcards.dataset}/{s}.parquet" for s in audit_systems()
            ]
        }
        | plan.reranker_embeddings(wildcards.dataset, wildcards.reranker)
    )


def quality_control_inputs(wildcards):
    base = f"results/datasets/{qc_spec(wildcards)['dataset']}"
    return {
        "base_source": f"{base}/source.json",
        "corpus": f"{base}/corpus.parquet",
        "queries": f"{base}/queries.parquet",
        "qrels_dev": f"{base}/qrels/dev.parquet",
        "qrels_test": f"{base}/qrels/test.parquet",
        "negatives": f"{base}/generation/negatives.parquet",
        "votes": [
            f"results/qc/{wildcards.dataset}/votes/{r}.parquet"
            for r in plan.qc_rerankers
        ],
        "prompts": plan.judge_prompts(),
    }


def label_audit_inputs(wildcards):
    audit = config["quality_control"]["label_audit"]
    return candidate_texts(wildcards.dataset) | {
        "qrels": f"results/datasets/{wildcards.dataset}/qrels.parquet",
        "runs": [
            f"results/runs/{wildcards.dataset}/{s}.parquet" for s in audit_systems()
        ],
        "votes": [
            f"results/audit/{wildcards.dataset}/votes/{r}.parquet"
            for r in plan.qc_rerankers
        ],
        "prompts": [plan.judge_prompts()] if audit["judge"] else [],
    }
