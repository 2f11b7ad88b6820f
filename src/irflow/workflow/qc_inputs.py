"""The input functions of the label audit (rules/qc.smk and label_audit.smk;
irflow.derived.qc), and the texts a voting reranker reads. ``Plan`` (irflow.workflow.run_inputs)
takes them from ``LabelAuditInputs``, with the runs' own ``reranker_embeddings``; quality control
of generated datasets is a derived dataset's kind (irflow.workflow.kinds.quality_control)."""


def candidate_texts(dataset):
    """The texts a voting reranker reads: the dataset's filtered corpus and queries."""
    base = f"results/datasets/{dataset}"
    return {
        "source": f"{base}/source.json",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    }


class LabelAuditInputs:
    """What the audit_votes and label_audit jobs read; a part of ``Plan``."""

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
