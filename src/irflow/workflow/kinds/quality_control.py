"""quality_control: quality-controlled copies of generated datasets (AIR-Bench's QC;
rules/qc.smk), defined by ``quality_control.generated``: what the qc_candidates, qc_votes and
quality_control jobs read."""

from irflow.core import settings_types
from irflow.derived.generate.dataset import checked_splits
from irflow.derived.qc.settings import list_quality_controlled
from irflow.workflow.kinds.base import DerivedKind
from irflow.workflow.qc_inputs import candidate_texts


class QualityControl(DerivedKind):
    name = "quality_control"
    order = 4
    layout = "quality-controlled copies"
    generated = True
    compared = True
    settings_type = settings_types.Generated

    def listed(self, config):
        return list_quality_controlled(config)

    def config_key(self, dataset, spec):
        return f"quality_control.generated.{dataset}"

    def manifests(self):
        """Its jobs', and each voting reranker's."""
        votes = [
            f"results/manifests/qc_votes/{q}/{r}.json"
            for q in self.datasets
            for r in self.plan.qc_rerankers
        ]
        return super().manifests() + votes

    def views(self):
        if not self.datasets:
            return {}
        return {
            "qc_audit": [f"results/qc/{q}/audit.parquet" for q in self.datasets],
            "quality_control_summary": ["results/quality_control.parquet"],
        }

    def other_splits(self, name):
        """The checked splits of QC'd copy ``name`` that the retriever's run does not cover (it
        retrieves the scored split's queries only): qc_candidates retrieves them. A split the
        generation leaves empty (dev_share 0 or 1) has no queries to retrieve."""
        generated = self.plan.kinds["generate"].typed[self.typed[name].dataset]
        empty = {0: "dev", 1: "test"}.get(generated.dev_share)
        checked = checked_splits(self.datasets[name])
        return [split for split in checked if split not in (generated.split, empty)]

    def candidates_retrieval(self, wildcards):
        qc = self.typed[wildcards.dataset]
        return self.plan.split_retrieval(qc.dataset, qc.retriever, qc.depth)

    def candidates_inputs(self, wildcards):
        """The split's queries and judgements, and what the retriever searches with."""
        qc = self.typed[wildcards.dataset]
        base = f"results/datasets/{qc.dataset}"
        return {
            "source": f"{base}/source.json",
            "queries": f"{base}/queries.parquet",
            "qrels": f"{base}/qrels/{wildcards.split}.parquet",
        } | self.plan.split_retrieval_files(qc.dataset, qc.retriever)

    def votes_inputs(self, wildcards):
        qc = self.typed[wildcards.dataset]
        generated, retriever = qc.dataset, qc.retriever
        others = self.other_splits(wildcards.dataset)
        runs = {"runs": [f"results/runs/{generated}/{retriever}.parquet"]}
        texts = candidate_texts(generated)
        if others:  # the filtered queries are the scored split's only
            texts["queries"] = f"results/datasets/{generated}/queries.parquet"
            runs["split_runs"] = [
                f"results/qc/{wildcards.dataset}/candidates/{split}.parquet" for split in others
            ]
        return texts | runs | self.plan.reranker_embeddings(generated, wildcards.reranker)

    def inputs(self, wildcards):
        base = f"results/datasets/{self.typed[wildcards.dataset].dataset}"
        return {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "queries": f"{base}/queries.parquet",
            "qrels_dev": f"{base}/qrels/dev.parquet",
            "qrels_test": f"{base}/qrels/test.parquet",
            "negatives": f"{base}/generation/negatives.parquet",
            "votes": [
                f"results/qc/{wildcards.dataset}/votes/{r}.parquet" for r in self.plan.qc_rerankers
            ],
            "prompts": self.plan.judge_prompts(),
        }


KIND = QualityControl
