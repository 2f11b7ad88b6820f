"""The input functions of rules/qc.smk, quality_control.smk and label_audit.smk: quality
control of generated datasets and the label audit (irflow.derived.qc). ``Plan``
(irflow.workflow.run_inputs) takes them from ``QualityControlInputs``, with the runs' own
``split_retrieval`` and ``reranker_embeddings``."""

from irflow.derived.generate.dataset import checked_splits


def candidate_texts(dataset):
    """The texts a voting reranker reads: the dataset's filtered corpus and queries."""
    base = f"results/datasets/{dataset}"
    return {
        "source": f"{base}/source.json",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    }


class QualityControlInputs:
    """What the qc_candidates, qc_votes, audit_votes, quality_control and label_audit jobs
    read; a part of ``Plan``."""

    def qc_spec(self, wildcards):
        """The quality_control.generated entry of the QC'd copy ``wildcards.dataset``."""
        return self.quality_controlled[wildcards.dataset]

    def qc_other_splits(self, name):
        """The checked splits of QC'd copy ``name`` that the retriever's run does not cover (it
        retrieves the scored split's queries only): qc_candidates retrieves them. A split the
        generation leaves empty (dev_share 0 or 1) has no queries to retrieve."""
        spec = self.quality_controlled[name]
        generated = self.generated[spec["dataset"]]
        empty = {0: "dev", 1: "test"}.get(generated["dev_share"])
        return [split for split in checked_splits(spec) if split not in (generated["split"], empty)]

    def qc_candidates_retrieval(self, wildcards):
        spec = self.qc_spec(wildcards)
        return self.split_retrieval(spec["dataset"], spec["retriever"], spec["depth"])

    def qc_candidates_inputs(self, wildcards):
        """The split's queries and judgements, and what the retriever searches with."""
        spec = self.qc_spec(wildcards)
        base = f"results/datasets/{spec['dataset']}"
        return {
            "source": f"{base}/source.json",
            "queries": f"{base}/queries.parquet",
            "qrels": f"{base}/qrels/{wildcards.split}.parquet",
        } | self.split_retrieval_files(spec["dataset"], spec["retriever"])

    def qc_votes_inputs(self, wildcards):
        generated = self.qc_spec(wildcards)["dataset"]
        retriever = self.qc_spec(wildcards)["retriever"]
        others = self.qc_other_splits(wildcards.dataset)
        runs = {"runs": [f"results/runs/{generated}/{retriever}.parquet"]}
        texts = candidate_texts(generated)
        if others:  # the filtered queries are the scored split's only
            texts["queries"] = f"results/datasets/{generated}/queries.parquet"
            runs["split_runs"] = [
                f"results/qc/{wildcards.dataset}/candidates/{split}.parquet" for split in others
            ]
        return texts | runs | self.reranker_embeddings(generated, wildcards.reranker)

    def audit_systems(self):
        """The systems whose runs pool an audited dataset's candidates: those named, else
        every system."""
        return self.config["quality_control"]["label_audit"]["systems"] or self.systems

    def audit_votes_inputs(self, wildcards):
        runs = [f"results/runs/{wildcards.dataset}/{s}.parquet" for s in self.audit_systems()]
        return (
            candidate_texts(wildcards.dataset)
            | {"runs": runs}
            | self.reranker_embeddings(wildcards.dataset, wildcards.reranker)
        )

    def quality_control_inputs(self, wildcards):
        base = f"results/datasets/{self.qc_spec(wildcards)['dataset']}"
        return {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "queries": f"{base}/queries.parquet",
            "qrels_dev": f"{base}/qrels/dev.parquet",
            "qrels_test": f"{base}/qrels/test.parquet",
            "negatives": f"{base}/generation/negatives.parquet",
            "votes": [
                f"results/qc/{wildcards.dataset}/votes/{r}.parquet" for r in self.qc_rerankers
            ],
            "prompts": self.judge_prompts(),
        }

    def label_audit_inputs(self, wildcards):
        audit = self.config["quality_control"]["label_audit"]
        return candidate_texts(wildcards.dataset) | {
            "qrels": f"results/datasets/{wildcards.dataset}/qrels.parquet",
            "runs": [f"results/runs/{wildcards.dataset}/{s}.parquet" for s in self.audit_systems()],
            "votes": [
                f"results/audit/{wildcards.dataset}/votes/{r}.parquet" for r in self.qc_rerankers
            ],
            "prompts": [self.judge_prompts()] if audit["judge"] else [],
        }
