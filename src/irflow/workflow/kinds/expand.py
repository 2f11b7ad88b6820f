"""expand: document-expanded copies of a dataset (docT5query, doc2query--; rules/expand.smk),
defined by the ``expand`` block."""

from irflow.derived.llm.client import answer_settings
from irflow.workflow.kinds.base import DerivedKind
from irflow.workflow.local_files import local_folder_files


class Expand(DerivedKind):
    name = "expand"
    order = 5
    layout = "document-expanded copies"
    # Its documents are new texts: nothing of its base's vectors is reused.
    reuses_vectors = False

    def filter_inputs(self, dataset):
        """Its base's filter outputs, whose documents it keeps
        (irflow.data.filter.run_filter_as_base), so that the copy ranks the same corpus as its
        base."""
        base = f"results/datasets/{self.base(dataset)}/filtered"
        return {
            f"base_{name}": f"{base}/{name}.parquet" for name in ("corpus", "audit", "clusters")
        }

    def inputs(self, wildcards):
        """The base dataset's tables, and the local files of the query model and of the
        filter's cross-encoder, so that editing them rebuilds."""
        spec = self.spec(wildcards)
        filter_spec = spec.get("filter")
        rerankers = self.config["rerankers"]
        return super().inputs(wildcards) | {
            "model": local_folder_files(spec["model"]["id"]) if "model" in spec else [],
            "filter_model": (
                local_folder_files(rerankers[filter_spec["reranker"]]["id"]) if filter_spec else []
            ),
        }

    def settings(self, wildcards):
        """The expand block, with the filter's cross-encoder and the llm settings that
        change the answers: a change to any of them rebuilds the copy."""
        spec = self.config["expand"][wildcards.dataset]
        settings = {"expand": spec}
        if "filter" in spec:
            settings["filter_model"] = self.config["rerankers"][spec["filter"]["reranker"]]
        if "llm" in spec:
            settings["llm"] = answer_settings(self.config["llm"])
        return settings

    def estimated(self):
        """The copies an llm expands, whose requests expand_estimate counts."""
        return [name for name, spec in self.datasets.items() if "llm" in spec]


KIND = Expand
