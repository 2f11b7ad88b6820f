"""sparse: learned sparse retrieval (SPLADE; irflow.retrieval.sparse), searched exactly over
the documents' vectors in results/sparse/. The retriever's entry is typed where the search
receives it (irflow.core.settings_types.Sparse)."""

from __future__ import annotations

from irflow.core.settings_types import Sparse as Entry
from irflow.workflow.families.base import EncodedVectors, VectorsJob


class SparseJob(VectorsJob):
    def load_encoder(self, spec: dict):
        """The SPLADE model of a ``models`` entry (typed by irflow.encoding.encode_parts)."""
        from irflow.retrieval.sparse import SparseModel

        return SparseModel.load(spec)

    def search_vectors(self, files, queries, settings: dict, threads: int) -> tuple:
        import torch

        from irflow.retrieval.sparse import sparse_search

        torch.set_num_threads(threads)
        retriever = Entry.model_validate(settings["retriever"])
        return sparse_search(
            files["corpus"],
            queries,
            settings["top_k"],
            settings["remove_self_matches"],
            retriever.query_batch_size,
            settings["latency_queries"],
        )


class Sparse(EncodedVectors):
    type = "sparse"
    schema_def = "sparse"
    encoder = "sparse"
    search_rule = "retrieve_sparse"
    job = SparseJob()


FAMILY = Sparse()
