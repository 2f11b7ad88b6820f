# Input functions and settings of rules/qc.smk (quality control and the label audit).


def qc_spec(wildcards):
    return QUALITY_CONTROLLED[wildcards.dataset]


def judge_prompts():
    return prompts_file({"prompts": config["quality_control"]["judge"]["prompts"]})


def reranker_settings(reranker):
    spec = config["rerankers"][reranker]
    settings = {"reranker_name": reranker, "reranker": spec}
    if spec["type"] == "bi-encoder":
        settings["model"] = model_result_settings(spec["model"])
    return settings


def candidate_texts(dataset):
    base = f"results/datasets/{dataset}"
    return {
        "source": f"{base}/source.json",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    }


def qc_votes_inputs(wildcards):
    generated = qc_spec(wildcards)["dataset"]
    retriever = qc_spec(wildcards)["retriever"]
    return (
        candidate_texts(generated)
        | {"runs": [f"results/runs/{generated}/{retriever}.parquet"]}
        | reranker_embeddings(generated, wildcards.reranker)
    )


def audit_systems():
    return config["quality_control"]["label_audit"]["systems"] or SYSTEMS


def audit_votes_inputs(wildcards):
    return (
        candidate_texts(wildcards.dataset)
        | {
            "runs": [
                f"results/runs/{wildcards.dataset}/{s}.parquet" for s in audit_systems()
            ]
        }
        | reranker_embeddings(wildcards.dataset, wildcards.reranker)
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
            f"results/qc/{wildcards.dataset}/votes/{r}.parquet" for r in QC_RERANKERS
        ],
        "prompts": judge_prompts(),
    }


def label_audit_inputs(wildcards):
    audit = config["quality_control"]["label_audit"]
    return candidate_texts(wildcards.dataset) | {
        "qrels": f"results/datasets/{wildcards.dataset}/qrels.parquet",
        "runs": [
            f"results/runs/{wildcards.dataset}/{s}.parquet" for s in audit_systems()
        ],
        "votes": [
            f"results/audit/{wildcards.dataset}/votes/{r}.parquet" for r in QC_RERANKERS
        ],
        "prompts": [judge_prompts()] if audit["judge"] else [],
    }
