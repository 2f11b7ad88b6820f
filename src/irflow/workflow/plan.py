"""The names the workflow's rules are built from: datasets, systems, models and the manifests
every job files, each derived once from the validated config (rules/common.smk builds one)."""

from irflow.core.config import reranked_name, system_kinds
from irflow.core.seeds import seed_groups
from irflow.core.settings_types import Index
from irflow.data.passages import document_side
from irflow.derived.qc.settings import audited_datasets
from irflow.retrieval.exact_search import searched_in_shards
from irflow.retrieval.rerankers import reranker_type
from irflow.workflow.families import (
    families,
    family,
    models_by_encoder,
    systems_by_rule,
    systems_with_step,
)
from irflow.workflow.families.dense import query_model
from irflow.workflow.families.lucene import layouts as lucene_layouts
from irflow.workflow.kinds import kinds_in_order


class WorkflowNames:
    """Every wildcard value of the workflow, from the validated ``config``."""

    def __init__(self, config):
        self.config = config
        self.base_datasets = sorted(config["datasets"])
        # The datasets made from others, by kind (irflow.workflow.kinds: positional variants,
        # generated benchmarks, curated, quality-controlled and document-expanded copies), in
        # the kinds' order; and each derived dataset's kind.
        self.kinds = {kind.name: kind(self) for kind in kinds_in_order()}
        self.derived = {name: kind for kind in self.kinds.values() for name in kind.datasets}
        self.datasets = self.base_datasets + [
            name for kind in self.kinds.values() for name in sorted(kind.datasets)
        ]
        # Datasets whose labels are audited (rules/qc.smk), and the rerankers that vote.
        self.audited = audited_datasets(config)
        self.qc_rerankers = config["quality_control"]["rerankers"]
        # Datasets whose system orderings the correlate stage compares: real and generated.
        self.correlated_datasets = self.base_datasets + [
            name for kind in self.kinds.values() if kind.compared for name in sorted(kind.datasets)
        ]
        self.dataset_specs = self._dataset_specs()
        # Where the results tables show each dataset (irflow.evaluation.tables): the Average
        # is over the benchmark's own datasets only.
        self.table_layout = self._table_layout()
        # Datasets whose documents are embedded in several jobs (rules/embed.smk), and those
        # whose documents one embed job embeds with the queries.
        self.sharded_datasets = [d for d in self.datasets if self.embed_shards(d) > 1]
        self.unsharded_datasets = [d for d in self.datasets if d not in self.sharded_datasets]
        self.retrievers = config["retrievers"]
        # The faiss indexes' blocks, typed once (irflow.core.settings_types).
        self.indexes = {
            name: Index.model_validate(block) for name, block in config["indexes"].items()
        }
        self.system_kinds = system_kinds(config)
        self.systems = sorted(self.system_kinds)
        # Per search step (by the name of its Snakemake rule), the retrievers it runs; their
        # families say which (irflow.workflow.families).
        self.searched_by = systems_by_rule(config)
        # Retrievers searching a faiss index of their model's embeddings (rules/embed.smk,
        # index.smk).
        self.dense_systems = systems_with_step(config, "index")
        # Retrievers searching a BM25 index of the filtered corpus (rules/index.smk,
        # index_bm25), built once per dataset and retriever.
        self.bm25_systems = systems_with_step(config, "index_bm25")
        # The layouts (flat, multifield) of the Lucene indexes the lucene retrievers search
        # (rules/index.smk, index_lucene), built once per dataset and layout.
        self.lucene_layouts = lucene_layouts(config)
        # Per folder of results/ that another encode step writes (rules/vectors.smk: learned
        # sparse vectors, ColBERT token vectors): the models whose vectors it holds.
        self.vector_models_by_folder = {
            folder: models
            for folder, models in models_by_encoder(config).items()
            if folder != "embeddings"
        }
        self.vector_models = sorted(set().union(*self.vector_models_by_folder.values()))
        self.fusion_systems = sorted(config["fusion"])
        self.reranked = {
            reranked_name(item["first_stage"], item["reranker"], k): (
                item["first_stage"],
                item["reranker"],
                k,
            )
            for item in config["reranking"]
            for k in item["k"]
        }
        self.dense_models = sorted({self.retrievers[s]["model"] for s in self.dense_systems})
        # Models whose documents are embedded as passages (long_documents firstp or maxp).
        self.passage_models = [m for m in self.dense_models if self.document_side(m) == "passages"]
        self.corpus_models = [m for m in self.dense_models if m not in self.passage_models]
        # A dual encoder's query models that embed no documents: only their query vectors are
        # made (rules/embed.smk, embed_query_model).
        self.query_only_models = sorted(
            {query_model(self.retrievers[s]) for s in self.dense_systems} - set(self.dense_models)
        )
        # Models whose transformer runs on an exported ONNX graph (rules/onnx_export.smk).
        self.onnx_models = [
            m
            for m in self.dense_models + self.query_only_models
            if config["models"][m]["backend"] != "torch"
        ]
        # The index jobs: a flat index searched in shards reads the embeddings, and has none.
        self.dense_indexes = sorted(
            {
                (self.retrievers[s]["model"], self.retrievers[s]["index"])
                for s in self.dense_systems
                if not searched_in_shards(self.indexes[self.retrievers[s]["index"]])
            }
        )
        self.pairs = [(d, s) for d in self.datasets for s in self.systems]
        # The published scores the system ordering is compared with: the published values set
        # beside this run's (results/published.parquet), or a CSV of the user's.
        reference = config["correlation"]["reference"]
        self.correlation_reference = (
            []
            if reference is None
            else ["results/published.parquet"]
            if reference == "published"
            else [reference]
        )
        # Which published system each first-stage retriever is (irflow.evaluation.published).
        self.published_identities = self._published_identities()
        # Where each kind of system files its run's manifest: results/manifests/<stage>/.
        self.run_stage = {"fusion": "fuse", "rerank": "rerank"} | {
            kind: found.run_stage for kind, found in families().items()
        }
        self.manifests = self._manifests()

    def _published_identities(self) -> dict[str, dict]:
        """Which published system each first-stage retriever and each reranking is
        (irflow.evaluation.published): a reranking by its reranker's type and model, its depth
        ``k`` and its first stage's family (None for a fusion), which a published entry's
        ``settings`` name (BEIR's BM25+CE: ``k: 100``, ``first_stage: bm25``)."""
        rerankers = self.config["rerankers"]
        identities = {
            name: family(spec["type"]).published_as(spec, self.config)
            for name, spec in sorted(self.retrievers.items())
        }
        for name, (first_stage, reranker, k) in sorted(self.reranked.items()):
            spec = rerankers[reranker]
            identity = reranker_type(spec["type"]).published_as(spec, self.config)
            first = identities.get(first_stage, {}).get("family")
            identities[name] = identity | {"k": k, "first_stage": first}
        return identities

    def _dataset_specs(self):
        """Each dataset's block; a dataset made from another has its kind's (its base's)."""
        return self.config["datasets"] | {
            name: kind.dataset_spec(name) for name, kind in self.derived.items()
        }

    def _table_layout(self):
        """Each dataset of the config with the group it counts in, each dataset made from
        another with that dataset and its kind, in words, and the in-domain datasets
        (irflow.evaluation.tables)."""
        # Datasets made under several seeds (irflow.core.seeds); only when some are, so that a
        # config of one seed per step lays its tables out, and reruns, as before.
        seeded = {}
        for kind in self.kinds.values():
            seeded |= kind.seeded()
        seeds = seed_groups(seeded)
        return ({"seeds": seeds} if seeds else {}) | {
            "benchmark": {
                name: self.config["datasets"][name].get("group") for name in self.base_datasets
            },
            "derived": {
                name: {"base": kind.base(name), "kind": kind.layout}
                for kind in self.kinds.values()
                for name in sorted(kind.datasets)
            },
            "in_domain": [
                name for name in self.base_datasets if self.config["datasets"][name]["in_domain"]
            ],
        }

    def embed_shards(self, dataset):
        return self.dataset_specs[dataset]["embed_shards"]

    def document_side(self, model):
        """What a model's index holds: ``corpus`` documents or their ``passages``."""
        return document_side(self.config["models"][model])

    def _manifests(self):
        """Every manifest the workflow files, one per job."""
        return (
            self._dataset_manifests()
            + self._encoding_manifests()
            + [
                f"results/manifests/{self.run_stage[self.system_kinds[s]]}/{d}/{s}.json"
                for d, s in self.pairs
            ]
            + [f"results/manifests/score/{d}/{s}.json" for d, s in self.pairs]
        )

    def _dataset_manifests(self):
        rerankers = self.qc_rerankers
        return (
            [f"results/manifests/ingest/{d}.json" for d in self.base_datasets]
            + [path for kind in self.kinds.values() for path in kind.manifests()]
            + [f"results/manifests/label_audit/{d}.json" for d in self.audited]
            + [
                f"results/manifests/audit_votes/{d}/{r}.json"
                for d in self.audited
                for r in rerankers
            ]
            + [f"results/manifests/filter/{d}.json" for d in self.datasets]
        )

    def _encoding_manifests(self):
        return (
            [
                f"results/manifests/passages/{d}/{m}.json"
                for d in self.datasets
                for m in self.passage_models
            ]
            + [
                f"results/manifests/embed/{d}/{m}/{side}.json"
                for d in self.datasets
                for m in self.dense_models
                for side in (self.document_side(m), "queries")
            ]
            + [
                f"results/manifests/embed/{d}/{m}/queries.json"
                for d in self.datasets
                for m in self.query_only_models
            ]
            + [
                f"results/manifests/embed/{d}/{m}/{side}.shards/{shard}-of-{shards}.json"
                for d in self.sharded_datasets
                for m in self.dense_models
                for side in [self.document_side(m)]
                for shards in [self.embed_shards(d)]
                for shard in range(shards)
            ]
            + [
                f"results/manifests/{folder}/{d}/{m}/{name}.json"
                for folder, models in self.vector_models_by_folder.items()
                for d in self.datasets
                for m in models
                for shards in [self.embed_shards(d)]
                for name in ["corpus", "queries"]
                + [f"corpus.shards/{i}-of-{shards}" for i in range(shards) if shards > 1]
            ]
            + [
                f"results/manifests/index/{d}/{m}/{i}.json"
                for d in self.datasets
                for m, i in self.dense_indexes
            ]
            + [
                f"results/manifests/index_bm25/{d}/{s}.json"
                for d in self.datasets
                for s in self.bm25_systems
            ]
            + [
                f"results/manifests/index_lucene/{d}/{fields}.json"
                for d in self.datasets
                for fields in self.lucene_layouts
            ]
        )
