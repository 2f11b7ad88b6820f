"""expand: document-expanded copies of a dataset (docT5query, doc2query--; rules/expand.smk),
defined by the ``expand`` block."""

from irflow.core import settings_types
from irflow.derived.llm.client import answer_settings
from irflow.workflow.kinds.base import DerivedKind
from irflow.workflow.local_files import local_folder_files


class Expand(DerivedKind):
    name = "expand"
    order = 5
    layout = "document-expanded copies"
    # Its documents are new texts: nothing of its base's vectors is reused.
    reuses_vectors = False
    settings_type = settings_types.Expand | settings_types.Expand1

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
        expand = self.typed[wildcards.dataset]
        rerankers = self.config["rerankers"]
        return super().inputs(wildcards) | {
            "model": local_folder_files(expand.model.id) if expand.model is not None else [],
            "filter_model": (
                local_folder_files(rerankers[expand.filter.reranker]["id"])
                if expand.filter is not None
                else []
            ),
        }

    def settings(self, wildcards):
        """The expand block, with the filter's cross-encoder and the llm settings that
        change the answers, as the config writes them: a change to any of them rebuilds the
        copy."""
        expand = self.typed[wildcards.dataset]
        settings = {"expand": self.config["expand"][wildcards.dataset]}
        if expand.filter is not None:
            settings["filter_model"] = self.config["rerankers"][expand.filter.reranker]
        if expand.llm is not None:
            settings["llm"] = answer_settings(self.config["llm"])
        return settings

    def estimated(self):
        """The copies an llm expands, whose requests expand_estimate counts."""
        return [name for name, expand in self.typed.items() if expand.llm is not None]


KIND = Expand
