# Names, file lists and input functions shared by the rules.
# Every wildcard value comes from the validated config.

import functools
from types import SimpleNamespace

from irflow.analyses.position import pooled_group
from irflow.core.config import reranked_name, system_kinds
from irflow.data.download import dataset_files, dataset_layout
from irflow.data.passages import document_side
from irflow.data.tokens import tokenizer_source
from irflow.derived.generate.dataset import list_generated
from irflow.derived.llm.client import answer_settings
from irflow.derived.positionalize import list_variants
from irflow.derived.qc.settings import audited_datasets, list_quality_controlled
from irflow.encoding.models import result_settings
from irflow.encoding.onnx_export import EXPORT_SETTINGS, ONNX_BACKENDS
from irflow.retrieval.external_run import is_url, run_location
from irflow.retrieval.index import build_settings
from irflow.workflow.families import (
    families,
    family,
    models_by_encoder,
    systems_by_rule,
    systems_with_step,
)

# Position-controlled variants (PosIR) are datasets built from a base dataset, not downloaded.
VARIANTS = list_variants(config)
BASE_DATASETS = sorted(config["datasets"])
# Benchmarks written by a language model from a dataset's corpus (AIR-Bench), not downloaded.
GENERATED = list_generated(config)
# Curated copies: a dataset's tables filtered with their own filter block (rules/filter.smk).
CURATED = {name: spec["dataset"] for name, spec in config["curate"].items()}
# Quality-controlled copies of generated datasets (AIR-Bench's QC; rules/qc.smk).
QUALITY_CONTROLLED = list_quality_controlled(config)
# Document-expanded copies (docT5query; rules/expand.smk), not downloaded.
EXPANDED = {name: spec["dataset"] for name, spec in config["expand"].items()}
DATASETS = (
    BASE_DATASETS
    + sorted(VARIANTS)
    + sorted(GENERATED)
    + sorted(CURATED)
    + sorted(QUALITY_CONTROLLED)
    + sorted(EXPANDED)
)
# Datasets whose labels are audited (rules/qc.smk), and the rerankers that vote.
AUDITED = audited_datasets(config)
QC_RERANKERS = config["quality_control"]["rerankers"]
# Datasets whose system orderings the correlate stage compares: real and generated ones.
CORRELATED_DATASETS = BASE_DATASETS + sorted(GENERATED) + sorted(QUALITY_CONTROLLED)
# Datasets whose per-query scores the position analysis places by the relevant span.
POSITION_DATASETS = sorted(VARIANTS) + config["position_analysis"]["datasets"]
# Models whose gradient saliency profile (PosIR §5.3) is computed.
SALIENCY_MODELS = config["position_analysis"]["saliency"]["models"]
DATASET_SPECS = (
    config["datasets"]
    | {
        variant: config["datasets"][spec["dataset"]]
        for variant, spec in VARIANTS.items()
    }
    | {
        # Generated query ids never name a document: nothing to remove, no unknown qrels.
        name: {"remove_self_matches": False, "unknown_qrels": "keep", "embed_shards": 1}
        for name in [*GENERATED, *QUALITY_CONTROLLED]
    }
    | {name: config["datasets"][base] for name, base in CURATED.items()}
    | {name: config["datasets"][base] for name, base in EXPANDED.items()}
)
# Datasets whose documents are embedded in several jobs (rules/embed.smk).
SHARDED_DATASETS = [d for d in DATASETS if DATASET_SPECS[d]["embed_shards"] > 1]
RETRIEVERS = config["retrievers"]
SYSTEM_KINDS = system_kinds(config)
SYSTEMS = sorted(SYSTEM_KINDS)
# Per search step (by the name of its Snakemake rule), the retrievers it runs; their
# families say which (irflow.workflow.families).
SEARCHED_BY = systems_by_rule(config)
# Retrievers searching a faiss index of their model's embeddings (rules/embed.smk, index.smk).
DENSE_SYSTEMS = systems_with_step(config, "index")
# Per folder of results/ that another encode step writes (rules/vectors.smk: learned sparse
# vectors, ColBERT token vectors): the models whose vectors it holds.
VECTOR_MODELS_BY_FOLDER = {
    folder: models
    for folder, models in models_by_encoder(config).items()
    if folder != "embeddings"
}
VECTOR_MODELS = sorted(set().union(*VECTOR_MODELS_BY_FOLDER.values()))
FUSION_SYSTEMS = sorted(config["fusion"])
RERANKED = {
    reranked_name(item["first_stage"], item["reranker"], k): (
        item["first_stage"],
        item["reranker"],
        k,
    )
    for item in config["reranking"]
    for k in item["k"]
}
DENSE_MODELS = sorted({RETRIEVERS[s]["model"] for s in DENSE_SYSTEMS})
# Models whose documents are embedded as passages (long_documents firstp or maxp).
PASSAGE_MODELS = [
    m for m in DENSE_MODELS if document_side(config["models"][m]) == "passages"
]
CORPUS_MODELS = [m for m in DENSE_MODELS if m not in PASSAGE_MODELS]
# Models whose transformer runs on an exported ONNX graph (rules/onnx_export.smk).
ONNX_MODELS = [m for m in DENSE_MODELS if config["models"][m]["backend"] != "torch"]
# Datasets whose documents one embed job embeds with the queries (rules/embed.smk).
UNSHARDED_DATASETS = [d for d in DATASETS if d not in SHARDED_DATASETS]
DENSE_INDEXES = sorted(
    {(RETRIEVERS[s]["model"], RETRIEVERS[s]["index"]) for s in DENSE_SYSTEMS}
)
PAIRS = [(d, s) for d in DATASETS for s in SYSTEMS]
# Where each kind of system files its run's manifest: results/manifests/<stage>/.
RUN_STAGE = {"fusion": "fuse", "rerank": "rerank"} | {
    kind: found.run_stage for kind, found in families().items()
}
MANIFESTS = (
    [f"results/manifests/ingest/{d}.json" for d in BASE_DATASETS]
    + [f"results/manifests/positionalize/{v}.json" for v in VARIANTS]
    + [f"results/manifests/generate/{g}.json" for g in GENERATED]
    + [f"results/manifests/curate/{c}.json" for c in CURATED]
    + [f"results/manifests/expand/{e}.json" for e in EXPANDED]
    + [f"results/manifests/quality_control/{q}.json" for q in QUALITY_CONTROLLED]
    + [
        f"results/manifests/qc_votes/{q}/{r}.json"
        for q in QUALITY_CONTROLLED
        for r in QC_RERANKERS
    ]
    + [f"results/manifests/label_audit/{d}.json" for d in AUDITED]
    + [
        f"results/manifests/audit_votes/{d}/{r}.json"
        for d in AUDITED
        for r in QC_RERANKERS
    ]
    + [f"results/manifests/filter/{d}.json" for d in DATASETS]
    + [
        f"results/manifests/passages/{d}/{m}.json"
        for d in DATASETS
        for m in PASSAGE_MODELS
    ]
    + [
        f"results/manifests/embed/{d}/{m}/{side}.json"
        for d in DATASETS
        for m in DENSE_MODELS
        for side in (document_side(config["models"][m]), "queries")
    ]
    + [
        f"results/manifests/embed/{d}/{m}/{side}.shards/{shard}-of-{shards}.json"
        for d in SHARDED_DATASETS
        for m in DENSE_MODELS
        for side in [document_side(config["models"][m])]
        for shards in [DATASET_SPECS[d]["embed_shards"]]
        for shard in range(shards)
    ]
    + [
        f"results/manifests/{folder}/{d}/{m}/{name}.json"
        for folder, models in VECTOR_MODELS_BY_FOLDER.items()
        for d in DATASETS
        for m in models
        for shards in [DATASET_SPECS[d]["embed_shards"]]
        for name in ["corpus", "queries"]
        + [f"corpus.shards/{i}-of-{shards}" for i in range(shards) if shards > 1]
    ]
    + [
        f"results/manifests/index/{d}/{m}/{i}.json"
        for d in DATASETS
        for m, i in DENSE_INDEXES
    ]
    + [f"results/manifests/{RUN_STAGE[SYSTEM_KINDS[s]]}/{d}/{s}.json" for d, s in PAIRS]
    + [f"results/manifests/score/{d}/{s}.json" for d, s in PAIRS]
)


def one_of(names):
    """A wildcard constraint matching exactly these names (and nothing when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def local_files(wildcards):
    """The dataset's files when they are on disk, so that editing them reruns its downstream."""
    source = config["datasets"][wildcards.dataset]["source"]
    candidates = (
        [Path(config["data_dir"]) / wildcards.dataset] if config["data_dir"] else []
    )
    candidates.append(Path(config["download_dir"]) / wildcards.dataset)
    candidates += [Path(source["path"])] if "path" in source else []
    for folder in candidates:
        if dataset_layout(folder, config["split"]):
            return [str(p) for p in dataset_files(folder, config["split"])]
    return [source["path"]] if "path" in source else []


def model_files(wildcards):
    """A model given as a local folder is an input, so editing its files re-embeds."""
    return local_folder_files(config["models"][wildcards.model]["id"])


@functools.cache
def local_folder_files(folder):
    """Every file under a local folder, listed once per workflow (not per job); none for a
    Hugging Face id."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.rglob("*") if p.is_file())


# The files a Hugging Face tokenizer is read from (not the weights beside them in a model's
# folder, so that replacing those does not rebuild what only the tokenizer decides).
TOKENIZER_FILES = re.compile(r"(.*token.*|vocab.*|merges\.txt|.*\.model|config\.json)")


def tokenizer_files(source):
    """A local tokenizer's files, as inputs; none for a Hugging Face id."""
    folder = Path(source["id"])
    if not folder.is_dir():
        return []
    return sorted(
        str(p)
        for p in folder.iterdir()
        if p.is_file() and TOKENIZER_FILES.fullmatch(p.name)
    )


def model_result_settings(model):
    """The settings that determine a model's vectors; batch size and device are not among them."""
    return result_settings(config["models"][model])


def onnx_graph(wildcards):
    """The exported graph an embed job of this model runs on; none for backend torch."""
    backend = config["models"][wildcards.model]["backend"]
    if backend == "torch":
        return []
    return f"results/onnx/{wildcards.model}/{backend}/model.onnx"


def onnx_export_settings(model, backend):
    spec = config["models"][model]
    return {
        "id": spec["id"],
        "revision": spec["revision"],
        "backend": backend,
        "export": EXPORT_SETTINGS[backend],
    }


def document_embeddings(wildcards):
    """The embeddings a model's index is built from: of documents, or of their passages."""
    side = document_side(config["models"][wildcards.model])
    return f"results/embeddings/{wildcards.dataset}/{wildcards.model}/{side}.parquet"


def texts_to_embed(dataset, model, side):
    if side == "passages":
        return f"results/datasets/{dataset}/passages/{model}.parquet"
    return f"results/datasets/{dataset}/filtered/{side}.parquet"


def embed_inputs(dataset, model, sides):
    """The model and, per side embedded (texts, then query_texts for the queries embedded
    with the documents), the texts; for a dataset made from another (a variant, a curated,
    generated or quality-controlled one), that dataset's texts and embeddings, whose vectors it
    reuses for unchanged rows."""
    inputs = {
        "source": f"results/datasets/{dataset}/source.json",
        "model": local_folder_files(config["models"][model]["id"]),
    }
    base = (
        VARIANTS[dataset]["dataset"]
        if dataset in VARIANTS
        else CURATED.get(dataset)
        or GENERATED.get(dataset, {}).get("dataset")
        or QUALITY_CONTROLLED.get(dataset, {}).get("dataset")
    )
    for prefix, side in zip(("", "query_"), sides):
        inputs[f"{prefix}texts"] = texts_to_embed(dataset, model, side)
        if base:
            inputs[f"reuse_{prefix}texts"] = texts_to_embed(base, model, side)
            inputs[f"reuse_{prefix}embeddings"] = (
                f"results/embeddings/{base}/{model}/{side}.parquet"
            )
    return inputs


def document_and_query_inputs(wildcards):
    """A model embeds a dataset's documents (or passages) and queries in one job: it is
    loaded once, and nothing changes one side without the other."""
    side = document_side(config["models"][wildcards.model])
    return embed_inputs(wildcards.dataset, wildcards.model, [side, "queries"])


def shard_inputs(wildcards):
    return embed_inputs(wildcards.dataset, wildcards.model, [wildcards.side])


def query_inputs(wildcards):
    return embed_inputs(wildcards.dataset, wildcards.model, ["queries"])


def embed_shards(dataset):
    return DATASET_SPECS[dataset]["embed_shards"]


def shard_paths(stage, wildcards):
    """The files of every shard of a dataset's document embeddings (stage embeddings or
    manifests/embed)."""
    folder = (
        f"results/{stage}/{wildcards.dataset}/{wildcards.model}/{wildcards.side}.shards"
    )
    count = embed_shards(wildcards.dataset)
    suffix = "json" if stage.startswith("manifests") else "parquet"
    return [f"{folder}/{shard}-of-{count}.{suffix}" for shard in range(count)]


def gather_inputs(wildcards):
    return {
        "source": f"results/datasets/{wildcards.dataset}/source.json",
        "texts": texts_to_embed(wildcards.dataset, wildcards.model, wildcards.side),
        "shards": shard_paths("embeddings", wildcards),
        "manifests": shard_paths("manifests/embed", wildcards),
    }


def dense_inputs(wildcards):
    """The index and query embeddings; the rows the index holds, and for passages the
    documents they belong to."""
    retriever = RETRIEVERS[wildcards.system]
    model, index = retriever["model"], retriever["index"]
    folder = f"results/embeddings/{wildcards.dataset}/{model}"
    side = document_side(config["models"][model])
    return {
        "source": f"results/datasets/{wildcards.dataset}/source.json",
        "index": f"results/indexes/{wildcards.dataset}/{model}/{index}.faiss",
        "corpus": f"{folder}/{side}.parquet",
        "queries": f"{folder}/queries.parquet",
    } | (
        {"passages": f"results/datasets/{wildcards.dataset}/passages/{model}.parquet"}
        if side == "passages"
        else {}
    )


def retrieval_settings(wildcards):
    """Everything that determines a run, so a change to any of it reruns only that run."""
    retriever = RETRIEVERS[wildcards.system]
    settings = {
        "retriever": retriever,
        "top_k": config["top_k"],
        "remove_self_matches": DATASET_SPECS[wildcards.dataset]["remove_self_matches"],
        "latency_queries": config["cost"]["latency_queries"],
    }
    return settings | family(retriever["type"]).search_settings(retriever, config)


def search_mb(wildcards, input, attempt):
    """The memory a retrieve job asks for: its family's model."""
    spec = RETRIEVERS[wildcards.system]
    settings = retrieval_settings(wildcards)
    return family(spec["type"]).search_mb(input, settings, attempt)


def reranker_embeddings(dataset, reranker):
    """A bi-encoder's document and query vectors, when the workflow computes them anyway for a
    dense retriever, and the queries' manifest (their encoding latency and model)."""
    spec = config["rerankers"][reranker]
    if spec["type"] == "bi-encoder" and spec["model"] in CORPUS_MODELS:
        folder = f"{dataset}/{spec['model']}"
        return {
            "embeddings": f"results/embeddings/{folder}/corpus.parquet",
            "query_embeddings": f"results/embeddings/{folder}/queries.parquet",
            "query_manifest": f"results/manifests/embed/{folder}/queries.json",
        }
    return {}


def rerank_inputs(wildcards):
    """The first-stage run and texts; for a bi-encoder, its model's vectors (reranker_embeddings)."""
    first_stage, reranker, _ = RERANKED[wildcards.system]
    base = f"results/datasets/{wildcards.dataset}"
    return {
        "source": f"{base}/source.json",
        "run": f"results/runs/{wildcards.dataset}/{first_stage}.parquet",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    } | reranker_embeddings(wildcards.dataset, reranker)


def rerank_settings(wildcards):
    first_stage, reranker, k = RERANKED[wildcards.system]
    spec = config["rerankers"][reranker]
    settings = {
        "first_stage": first_stage,
        "reranker_name": reranker,
        "k": k,
        "reranker": spec,
    }
    if spec["type"] in ("bi-encoder", "late-interaction"):
        settings["model"] = model_result_settings(spec["model"])
    return settings


def external_run_settings(wildcards):
    """Everything that determines the imported run, so a change to any of it reruns it."""
    spec = RETRIEVERS[wildcards.system]
    return {
        "retriever": spec,
        "location": run_location(spec["path"], wildcards.dataset),
        "md5": spec["md5"].get(wildcards.dataset),
        "top_k": config["top_k"],
        "remove_self_matches": DATASET_SPECS[wildcards.dataset]["remove_self_matches"],
    }


def external_run_inputs(wildcards):
    """The dataset's filtered tables, its whole queries table (a run's queries without
    judgements are dropped, not unknown) and, for a local run file, the file itself, so
    that replacing it reruns the import."""
    base = f"results/datasets/{wildcards.dataset}"
    inputs = {
        "source": f"{base}/source.json",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
        "all_queries": f"{base}/queries.parquet",
    }
    location = external_run_settings(wildcards)["location"]
    return inputs | ({} if is_url(location) else {"run_file": location})


def database_inputs(wildcards):
    """Every Parquet output (and the manifests), by the view that shows it."""
    per_dataset = lambda name: [
        f"results/datasets/{d}/{name}.parquet" for d in DATASETS
    ]
    views = {
        "corpus": per_dataset("corpus"),
        "queries": per_dataset("queries"),
        "qrels": per_dataset("qrels"),
        "filter_audit": per_dataset("filtered/audit"),
        "clusters": per_dataset("filtered/clusters"),
        "filter_summary": ["results/filter_summary.parquet"],
        "runs": [f"results/runs/{d}/{s}.parquet" for d, s in PAIRS],
        "per_query": [f"results/scores/{d}/{s}.parquet" for d, s in PAIRS],
        "summary": ["results/summary.parquet"],
        "cost": ["results/cost.parquet"],
        "significance": ["results/significance.parquet"],
        "correlations": ["results/correlations.parquet"],
        "bootstrap": ["results/bootstrap.parquet"],
        "corpus_similarity": ["results/corpus_similarity.parquet"],
        "manifests": MANIFESTS,
    }
    if PASSAGE_MODELS:  # read_parquet of no file is an error
        views["passages"] = [
            f"results/datasets/{d}/passages/{m}.parquet"
            for d in DATASETS
            for m in PASSAGE_MODELS
        ]
    if POSITION_DATASETS:
        views["position_bins"] = ["results/position_bins.parquet"]
        views["psi"] = ["results/psi.parquet"]
    if SALIENCY_MODELS:
        views["saliency"] = [f"results/saliency/{m}.parquet" for m in SALIENCY_MODELS]
    if config["negatives"]:
        views["negatives"] = [
            f"results/negatives/{n}.parquet" for n in config["negatives"]
        ]
    if QUALITY_CONTROLLED:
        views["qc_audit"] = [
            f"results/qc/{q}/audit.parquet" for q in QUALITY_CONTROLLED
        ]
        views["quality_control_summary"] = ["results/quality_control.parquet"]
    if AUDITED:
        views["label_audit"] = [
            f"results/audit/{d}/candidates.parquet" for d in AUDITED
        ]
        views["label_audit_hole"] = [f"results/audit/{d}/hole.parquet" for d in AUDITED]
        views["label_audit_summary"] = ["results/label_audit.parquet"]
    return views


def variant_tokenizer(wildcards):
    return tokenizer_source(VARIANTS[wildcards.dataset]["tokenizer"], config["models"])


def positionalize_inputs(wildcards):
    """The base dataset's tables, and a local tokenizer's files, so that editing them rebuilds
    the variant; with a screen, its reranker's local model files too (none otherwise, so that
    a variant without one keeps its inputs)."""
    spec = VARIANTS[wildcards.dataset]
    base = f"results/datasets/{spec['dataset']}"
    inputs = {
        "base_source": f"{base}/source.json",
        "corpus": f"{base}/corpus.parquet",
        "queries": f"{base}/queries.parquet",
        "qrels": f"{base}/qrels.parquet",
        "tokenizer": tokenizer_files(variant_tokenizer(wildcards)),
    }
    if "screen" in spec:
        reranker = spec["screen"]["spec"]
        folder = reranker.get("id") or config["models"][reranker["model"]]["id"]
        inputs["screen_model"] = local_folder_files(folder)
    return inputs


def positionalize_env(wildcards):
    """A screen's reranker needs torch and sentence-transformers; plain variants do not."""
    screened = "screen" in VARIANTS[wildcards.dataset]
    return f"../envs/positionalize{'-screen' if screened else ''}.yaml"


def position_groups():
    """Per dataset analysed: the group its queries are pooled in (a variant's positionalize
    block, whose lengths and positions the buckets and bins tell apart), the tokenizer that
    counts its documents' tokens, and a variant's configured position."""
    chosen = config["position_analysis"]["tokenizer"]
    groups = {}
    for dataset in POSITION_DATASETS:
        spec = VARIANTS.get(dataset, {})
        groups[dataset] = {
            "group": spec.get("block")
            or pooled_group(dataset, config["position_analysis"])
            or dataset,
            "tokenizer": tokenizer_source(
                chosen or spec["tokenizer"], config["models"]
            ),
            "position": spec.get("position"),
        }
    return groups


def passages_tokenizer(wildcards):
    return tokenizer_source(wildcards.model, config["models"])


def generate_inputs(wildcards):
    """The source dataset's corpus (and qrels when sampling its positives), the prompts file
    and a local tokenizer's files (it counts chunk_tokens, min_words and max_words), so that
    editing any of them regenerates (the answer cache makes unchanged prompts free)."""
    spec = GENERATED[wildcards.dataset]
    base = f"results/datasets/{spec['dataset']}"
    tokenizer = (
        tokenizer_files(tokenizer_source(spec["tokenizer"], config["models"]))
        if spec["tokenizer"]
        else []
    )
    inputs = {
        "base_source": f"{base}/source.json",
        "corpus": f"{base}/corpus.parquet",
        "prompts": prompts_file(spec),
        "tokenizer": tokenizer,
    }
    if spec["sample_from"] == "positives":
        inputs["qrels"] = f"{base}/qrels.parquet"
    return inputs


def estimate_quality_control(wildcards):
    """The QC'd copies of the generated dataset whose judge the dry-run estimate counts."""
    return {
        name: spec
        for name, spec in QUALITY_CONTROLLED.items()
        if spec["dataset"] == wildcards.dataset
    }


def generate_estimate_inputs(wildcards):
    """generate's inputs, and the judge's prompts when a QC'd copy is estimated too."""
    inputs = generate_inputs(wildcards)
    if estimate_quality_control(wildcards):
        inputs["judge_prompts"] = judge_prompts()  # rules/qc_common.smk
    return inputs


def prompts_file(spec):
    """A relative prompts path is looked up in the working directory, then beside the
    Snakefile, so the shipped config/prompts are found from any working directory."""
    path = Path(spec["prompts"])
    if not path.is_absolute() and not path.exists():
        shipped = Path(workflow.basedir) / path
        if shipped.exists():
            return str(shipped)
    return str(path)


def filter_inputs(wildcards):
    """The dataset's tables; for a document-expanded copy (expand) also its base's filter
    outputs, whose documents it keeps (irflow.data.filter.run_filter_as_base), so that the copy
    ranks the same corpus as its base."""
    folder = f"results/datasets/{wildcards.dataset}"
    inputs = {"source": f"{folder}/source.json"} | {
        name: f"{folder}/{name}.parquet" for name in ("corpus", "queries", "qrels")
    }
    if wildcards.dataset in EXPANDED:
        base = f"results/datasets/{EXPANDED[wildcards.dataset]}/filtered"
        tables = ("corpus", "audit", "clusters")
        inputs |= {f"base_{name}": f"{base}/{name}.parquet" for name in tables}
    return inputs


def filter_rules(wildcards):
    """A curated dataset's own filter block, or the top-level one."""
    if wildcards.dataset in CURATED:
        return config["curate"][wildcards.dataset]["filter"]
    return config["filter"]


def negatives_inputs(wildcards):
    """The scored split's run and judgements (and a dense system's vectors); for another
    split, every query (the job reads the split's qrels and retrieves them itself)."""
    spec = config["negatives"][wildcards.export]
    base = f"results/datasets/{spec['dataset']}"
    inputs = {
        "source": f"{base}/source.json",
        "corpus": f"{base}/filtered/corpus.parquet",
    }
    if spec["split"] != config["split"]:
        return inputs | {"queries": f"{base}/queries.parquet"}
    inputs |= {
        "run": f"results/runs/{spec['dataset']}/{spec['system']}.parquet",
        "qrels": f"{base}/qrels.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    }
    if spec["system"] in DENSE_SYSTEMS:
        # The stored vectors score the positives the run did not retrieve.
        dense = dense_inputs(
            SimpleNamespace(dataset=spec["dataset"], system=spec["system"])
        )
        inputs |= {
            "vectors_queries": dense["queries"],
            "vectors_documents": dense["corpus"],
        }
        if "passages" in dense:
            inputs["vectors_passages"] = dense["passages"]
    return inputs


def negatives_retrieval(wildcards):
    """What the negatives job retrieves another split with (None for the scored split)."""
    spec = config["negatives"][wildcards.export]
    if spec["split"] == config["split"]:
        return None
    return split_retrieval(spec["dataset"], spec["system"], spec["top_k"])


def split_retrieval(dataset, system, top_k):
    """How a job retrieves a split the retrieve jobs do not run, with ``system`` as the
    workflow runs it on ``dataset`` (irflow.retrieval.retrieve.retrieve_judged)."""
    retriever = RETRIEVERS[system]
    retrieval = {
        "retriever": retriever,
        "top_k": top_k,
        "remove_self_matches": DATASET_SPECS[dataset]["remove_self_matches"],
    }
    return retrieval | family(retriever["type"]).search_settings(retriever, config)


def split_retrieval_files(dataset, system):
    """What split_retrieval's job reads: BM25's filtered corpus; a dense retriever's index,
    the rows it holds (and their passages' documents) and its model, which encodes the
    split's queries."""
    if system not in DENSE_SYSTEMS:
        return {"corpus": f"results/datasets/{dataset}/filtered/corpus.parquet"}
    inputs = dense_inputs(SimpleNamespace(dataset=dataset, system=system))
    model = RETRIEVERS[system]["model"]
    return {
        "index": inputs["index"],
        "rows": inputs["corpus"],
        "model": local_folder_files(config["models"][model]["id"]),
        "onnx": onnx_graph(SimpleNamespace(model=model)),
    } | ({"passages": inputs["passages"]} if "passages" in inputs else {})


def vector_inputs(wildcards, sides):
    """The model's files and, per side encoded (texts, then query_texts), the texts."""
    inputs = {
        "source": f"results/datasets/{wildcards.dataset}/source.json",
        "model": local_folder_files(config["models"][wildcards.model]["id"]),
    }
    for prefix, side in zip(("", "query_"), sides):
        inputs[f"{prefix}texts"] = texts_to_embed(
            wildcards.dataset, wildcards.model, side
        )
    return inputs


def vector_gather_inputs(wildcards):
    folder = f"{wildcards.family}/{wildcards.dataset}/{wildcards.model}/corpus.shards"
    count = embed_shards(wildcards.dataset)
    names = [f"{shard}-of-{count}" for shard in range(count)]
    return {
        "source": f"results/datasets/{wildcards.dataset}/source.json",
        "texts": texts_to_embed(wildcards.dataset, wildcards.model, "corpus"),
        "shards": [f"results/{folder}/{name}.parquet" for name in names],
        "manifests": [f"results/manifests/{folder}/{name}.json" for name in names],
    }


def vector_search_inputs(wildcards):
    retriever = RETRIEVERS[wildcards.system]
    encoder = family(retriever["type"]).encoder
    folder = f"results/{encoder}/{wildcards.dataset}/{retriever['model']}"
    return {
        "source": f"results/datasets/{wildcards.dataset}/source.json",
        "corpus": f"{folder}/corpus.parquet",
        "queries": f"{folder}/queries.parquet",
    }


def expand_inputs(wildcards):
    """The base dataset's tables, and the local files of the query model and of the filter's
    cross-encoder, so that editing them rebuilds."""
    spec = config["expand"][wildcards.dataset]
    base = f"results/datasets/{spec['dataset']}"
    filter_spec = spec.get("filter")
    return {
        "base_source": f"{base}/source.json",
        "corpus": f"{base}/corpus.parquet",
        "queries": f"{base}/queries.parquet",
        "qrels": f"{base}/qrels.parquet",
        "model": local_folder_files(spec["model"]["id"]) if "model" in spec else [],
        "filter_model": (
            local_folder_files(config["rerankers"][filter_spec["reranker"]]["id"])
            if filter_spec
            else []
        ),
    }


def expand_settings(wildcards):
    """The expand block, with the filter's cross-encoder and the llm settings that change the
    answers: a change to any of them rebuilds the copy."""
    spec = config["expand"][wildcards.dataset]
    settings = {"expand": spec}
    if "filter" in spec:
        settings["filter_model"] = config["rerankers"][spec["filter"]["reranker"]]
    if "llm" in spec:
        settings["llm"] = answer_settings(config["llm"])
    return settings


# The memory each job asks for (`resources: mem_mb=`): a model per rule, in irflow.workflow.resources.
from irflow.workflow import resources as memory
