"""late-interaction: ColBERT-style token vectors (results/tokens/) scored by MaxSim, exactly or
over a Voyager index's candidates (irflow.retrieval.late_interaction). The retriever's entry is
typed where the search receives it (irflow.core.settings_types.LateInteraction), the models'
entries where the config check reads them (irflow.core.settings_types.ModelModel)."""

from __future__ import annotations

from irflow.core.config import register_check
from irflow.core.settings_types import LateInteraction as Entry
from irflow.core.settings_types import ModelModel
from irflow.workflow.families.base import EncodedVectors, VectorsJob

TYPE = "late-interaction"


class LateInteractionJob(VectorsJob):
    def load_encoder(self, spec: dict):
        """The ColBERT model of a ``models`` entry (typed by irflow.encoding.encode_parts)."""
        from irflow.retrieval.late_interaction import TokenEncoder

        return TokenEncoder.load(spec)

    def encode_facts(self, encoder, texts, side: str, shard: tuple[int, int]) -> dict:
        """The texts cut to the model's query or document length."""
        return encoder.truncation(texts, side, shard)

    def search_vectors(self, files, queries, settings: dict, threads: int) -> tuple:
        import torch

        from irflow.retrieval.late_interaction import late_interaction_search

        torch.set_num_threads(threads)
        retriever = Entry.model_validate(settings["retriever"])
        return late_interaction_search(
            files["corpus"],
            queries,
            settings["top_k"],
            settings["remove_self_matches"],
            retriever.query_batch_size,
            settings["latency_queries"],
            index=retriever.index,
        )


class LateInteraction(EncodedVectors):
    type = TYPE
    schema_def = "late_interaction"
    encoder = "tokens"
    search_rule = "retrieve_late_interaction"
    job = LateInteractionJob()


FAMILY = LateInteraction()


@register_check
def token_length_problems(config: dict) -> list[str]:
    """query_length and document_length are read by late-interaction models only (retrievers
    and rerankers of this type); their checkpoints' lengths override max_seq_length, so it is
    refused there."""
    late = {
        spec["model"]
        for spec in [*config["retrievers"].values(), *config["rerankers"].values()]
        if spec["type"] == TYPE
    }
    problems = []
    for name, entry in config["models"].items():
        spec = ModelModel.model_validate(entry)
        keys = ["max_seq_length"] if name in late else ["query_length", "document_length"]
        for key in keys:
            if getattr(spec, key) is not None:
                problems.append(
                    f"config key 'models.{name}.{key}': "
                    + (
                        "a late-interaction model reads query_length and document_length"
                        if name in late
                        else "only late-interaction (ColBERT) models read it"
                    )
                )
    return problems
