"""base: what irflow knows of a reranker type, the protocol each type implements.

A reranker type is the ``type`` of a ``rerankers`` entry (cross-encoder, bi-encoder, ...). Its
one module under irflow.retrieval.rerankers says everything the rules, the config check, the
memory requests and the features that score with a reranker need: its schema fragment, the
models it names, the settings that determine its scores, the vectors it reads, the memory it
holds, its scorer, and what it can do beyond reranking runs and voting in quality control
(screening fillers, filtering expansions, running on ONNX Runtime). The scoring itself stays in
irflow.retrieval.scorers; a type calls it.
"""

from __future__ import annotations

from irflow.core.config import missing_key
from irflow.data.passages import splits_documents
from irflow.encoding.models import result_settings
from irflow.retrieval.scorers import Scorer, ScoringJob


class RerankerType:
    """One reranker type. Class attributes describe it; methods take the reranker's config
    entry (``spec``) and the validated config."""

    # The ``type`` a rerankers entry names.
    type: str
    # Its entry's schema: the name of its fragment in config/config.schema.yaml's $defs (an
    # installed entry point has none there: irflow.core.plugins.Registry.with_installed).
    schema_def: str | None = None
    # Screens a positionalize block's candidate fillers (irflow.derived.positionalize.Screen):
    # its scores of one query against a few texts are comparable with one another.
    screens: bool = False
    # Filters generated queries of an expand block (irflow.derived.expand): its scorer scores
    # (query, text) pairs in one call (``score_pairs``). scripts/expand.py loads the filter as a
    # CrossEncoderScorer, the one such scorer; a second type would load it with load_scorer.
    filters_expansions: bool = False
    # Its entry has a ``backend`` that may run it on ONNX Runtime (irflow.encoding.onnx_export).
    exports_onnx: bool = False

    def model(self, spec: dict) -> str | None:
        """The key of ``models`` it scores with (None when its entry names its own model)."""
        return spec.get("model")

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """What is wrong with reranker ``name`` beyond its schema, each naming its key: its
        model must be a ``models`` key that keeps each document whole."""
        model, key = self.model(spec), f"rerankers.{name}.model"
        if model is None:
            return []
        if model not in config["models"]:
            return [missing_key(key, model, "models", config["models"])]
        if splits_documents(config["models"][model]):
            # A reranker scores a document as a whole; passage scores are not combined.
            return [
                f"config key '{key}': {model!r} splits documents into passages; a "
                f"{self.type} reranker needs a model with long_documents.strategy truncate"
            ]
        return []

    def settings(self, spec: dict, config: dict) -> dict:
        """Settings beyond its entry that determine its scores (every job that scores with it
        has them among its params): the settings that determine its model's vectors."""
        model = self.model(spec)
        return {} if model is None else {"model": result_settings(config["models"][model])}

    def published_as(self, spec: dict, config: dict) -> dict:
        """Which published reranker this is (irflow.evaluation.published): its type and the
        Hugging Face id of the model it scores with (``hub_id`` where ``id`` is a local
        folder), as a published BM25+CE names ``cross-encoder`` and its model."""
        model = self.model(spec)
        entry = config["models"][model] if model else spec
        named = entry.get("hub_id") or entry.get("id")
        return {"family": self.type} | ({"model": named} if named else {})

    def embeddings_model(self, spec: dict) -> str | None:
        """The model whose dense embeddings files (rules/embed.smk) its scorer reads, when
        the workflow makes them anyway (irflow.workflow.run_inputs.Plan.reranker_embeddings)."""
        return None

    def held_bytes(self, spec: dict) -> int:
        """What its scorer holds beyond the model and the candidates' texts
        (irflow.workflow.resources.rerank_mb)."""
        return 0

    def scorer(self, spec: dict, job: ScoringJob) -> Scorer:
        """Its scorer (irflow.retrieval.scorers.Scorer), loaded for ``job``."""
        raise NotImplementedError
