"""The workflow's names and input functions (irflow.workflow.plan, inputs, run_inputs), on small
validated configs: what each job reads, without running Snakemake."""

from types import SimpleNamespace

import yaml
from conftest import REPO, SCHEMA, place_local_datasets, validated

from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.run_inputs import Plan


def plan_of(**config):
    """A Plan of a config with dataset ``d`` (read from a URL) and BM25 unless given."""
    return Plan(validated(**config), REPO)


def dense(**config):
    """``d`` with BM25 and a dense retriever ``mini`` of model ``m``."""
    return plan_of(
        models={"m": {"id": "org/m"}},
        retrievers={"bm25": {"type": "bm25"}, "mini": {"type": "dense", "model": "m"}},
        **config,
    )


def test_derived_datasets_follow_the_base_datasets_and_share_their_spec():
    plan = plan_of(
        datasets={
            "d": {"source": {"type": "url", "url": "https://example.org/d.zip"}, "embed_shards": 3}
        },
        curate={"d-clean": {"dataset": "d"}},
    )
    assert plan.datasets == ["d", "d-clean"]
    assert plan.kinds["curate"].base("d-clean") == "d"
    # A curated copy is sharded like its base, so both embed in several jobs.
    assert plan.dataset_specs["d-clean"] == plan.dataset_specs["d"]
    assert plan.sharded_datasets == ["d", "d-clean"]
    assert plan.unsharded_datasets == []
    assert plan.base_dataset("d-clean") == "d"
    assert plan.base_dataset("d") is None


def test_a_derived_dataset_reuses_its_bases_texts_and_vectors():
    plan = dense(curate={"d-clean": {"dataset": "d"}})
    inputs = plan.document_and_query_inputs(SimpleNamespace(dataset="d-clean", model="m"))
    assert inputs["texts"] == "results/datasets/d-clean/filtered/corpus.parquet"
    assert inputs["query_texts"] == "results/datasets/d-clean/filtered/queries.parquet"
    assert inputs["reuse_texts"] == "results/datasets/d/filtered/corpus.parquet"
    assert inputs["reuse_query_embeddings"] == "results/embeddings/d/m/queries.parquet"
    base = plan.document_and_query_inputs(SimpleNamespace(dataset="d", model="m"))
    assert not any(key.startswith("reuse_") for key in base)


def test_a_bi_encoder_reranker_reuses_a_dense_retrievers_vectors():
    plan = dense(
        rerankers={
            "bi": {"type": "bi-encoder", "model": "m"},
            "ce": {"type": "cross-encoder", "id": "org/ce"},
        },
        reranking=[
            {"first_stage": "bm25", "reranker": "bi", "k": [10]},
            {"first_stage": "bm25", "reranker": "ce", "k": [5, 20]},
        ],
    )
    assert plan.reranked == {
        "bm25+bi@10": ("bm25", "bi", 10),
        "bm25+ce@5": ("bm25", "ce", 5),
        "bm25+ce@20": ("bm25", "ce", 20),
    }
    bi = plan.rerank_inputs(SimpleNamespace(dataset="d", system="bm25+bi@10"))
    assert bi["run"] == "results/runs/d/bm25.parquet"
    assert bi["embeddings"] == "results/embeddings/d/m/corpus.parquet"
    assert bi["query_manifest"] == "results/manifests/embed/d/m/queries.json"
    cross = plan.rerank_inputs(SimpleNamespace(dataset="d", system="bm25+ce@20"))
    assert "embeddings" not in cross
    settings = plan.rerank_settings(SimpleNamespace(dataset="d", system="bm25+bi@10"))
    assert (settings["k"], settings["model"]["id"]) == (10, "org/m")


def test_every_job_files_one_manifest():
    plan = dense(
        datasets={
            "d": {"source": {"type": "url", "url": "https://example.org/d.zip"}, "embed_shards": 2}
        }
    )
    assert plan.manifests == [
        "results/manifests/ingest/d.json",
        "results/manifests/filter/d.json",
        "results/manifests/embed/d/m/corpus.json",
        "results/manifests/embed/d/m/queries.json",
        "results/manifests/embed/d/m/corpus.shards/0-of-2.json",
        "results/manifests/embed/d/m/corpus.shards/1-of-2.json",
        "results/manifests/index/d/m/flat.json",
        "results/manifests/index_bm25/d/bm25.json",
        "results/manifests/retrieve/d/bm25.json",
        "results/manifests/retrieve/d/mini.json",
        "results/manifests/score/d/bm25.json",
        "results/manifests/score/d/mini.json",
    ]
    gathered = plan.gather_inputs(SimpleNamespace(dataset="d", model="m", side="corpus"))
    assert gathered["shards"] == [
        "results/embeddings/d/m/corpus.shards/0-of-2.parquet",
        "results/embeddings/d/m/corpus.shards/1-of-2.parquet",
    ]


def test_another_split_is_retrieved_from_the_index_and_the_model():
    plan = dense(top_k=100)
    assert plan.split_retrieval_files("d", "bm25") == {"index": "results/indexes/d/bm25.bm25s"}
    files = plan.split_retrieval_files("d", "mini")
    assert files["index"] == "results/indexes/d/m/flat.faiss"
    assert files["corpus"] == "results/embeddings/d/m/corpus.parquet"
    assert (files["model"], files["onnx"]) == ([], [])  # a Hugging Face id, torch
    retrieval = plan.split_retrieval("d", "mini", 30)
    assert (retrieval["top_k"], retrieval["retriever"]["model"]) == (30, "m")
    run = plan.retrieval_settings(SimpleNamespace(dataset="d", system="mini"))
    assert run["top_k"] == 100 and "latency_queries" in run


def test_a_flat_index_searched_in_shards_has_no_index_job():
    """Its search reads the embeddings a shard at a time (irflow.retrieval.exact_search): no
    job builds, and no job reads, an index file for it."""
    plan = plan_of(
        models={"m": {"id": "org/m"}},
        indexes={"whole": {"type": "flat"}, "shards": {"type": "flat", "shard_rows": 1024}},
        retrievers={
            "held": {"type": "dense", "model": "m", "index": "whole"},
            "sharded": {"type": "dense", "model": "m", "index": "shards"},
        },
    )
    assert plan.dense_indexes == [("m", "whole")]
    index_jobs = [path for path in plan.manifests if path.startswith("results/manifests/index/")]
    assert index_jobs == ["results/manifests/index/d/m/whole.json"]
    held, sharded = (SimpleNamespace(dataset="d", system=s) for s in ("held", "sharded"))
    assert plan.dense_inputs(held)["index"] == "results/indexes/d/m/whole.faiss"
    assert plan.dense_inputs(sharded) == {
        "source": "results/datasets/d/source.json",
        "corpus": "results/embeddings/d/m/corpus.parquet",
        "queries": "results/embeddings/d/m/queries.parquet",
    }
    assert "index" not in plan.split_retrieval_files("d", "sharded")


def test_negatives_of_the_scored_split_read_the_run_and_a_dense_systems_vectors():
    plan = dense(
        split="test",
        negatives={
            "scored": {"dataset": "d", "system": "mini", "split": "test"},
            "train": {"dataset": "d", "system": "bm25", "split": "train"},
        },
    )
    scored = SimpleNamespace(export="scored")
    inputs = plan.negatives_inputs(scored)
    assert inputs["run"] == "results/runs/d/mini.parquet"
    assert inputs["vectors_documents"] == "results/embeddings/d/m/corpus.parquet"
    assert plan.negatives_retrieval(scored) is None
    train = SimpleNamespace(export="train")
    assert plan.negatives_inputs(train) == {
        "source": "results/datasets/d/source.json",
        "corpus": "results/datasets/d/filtered/corpus.parquet",
        "search_index": "results/indexes/d/bm25.bm25s",  # the retrieve job's index, loaded
        "queries": "results/datasets/d/queries.parquet",
    }
    # Every BM25 job of the dataset reads the one index, the retrieve job too.
    assert plan.bm25_inputs(SimpleNamespace(dataset="d", system="bm25"))["index"] == (
        "results/indexes/d/bm25.bm25s"
    )
    assert plan.negatives_retrieval(train)["retriever"] == plan.retrievers["bm25"]
    assert plan.negatives_env(train) == plan.negatives_env(scored) == "../envs/data.yaml"
    assert plan.database_inputs(None)["negatives"] == [
        "results/negatives/scored.parquet",
        "results/negatives/train.parquet",
    ]


def test_shipped_prompts_are_found_beside_the_snakefile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of()
    assert plan.judge_prompts() == str(REPO / plan.config["quality_control"]["judge"]["prompts"])
    assert plan.prompts_file({"prompts": "missing.yaml"}) == "missing.yaml"


def reversed_keys(value):
    """``value`` with the keys of every mapping in it in reverse order."""
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(value)}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


def test_the_order_of_a_configs_keys_changes_no_params(monkeypatch, minilm_path, tmp_path):
    """Snakemake reruns a job whose params' repr changed, and a dict's repr follows its key
    order: every params value is made from the validated config (and the Plan made from it),
    so that config is the same, key order included, whichever order the keys were written in."""
    for variable in ("IRFLOW_MINILM", "IRFLOW_STATIC_MODEL"):
        monkeypatch.setenv(variable, str(minilm_path))
    monkeypatch.chdir(tmp_path)  # where the configs' local datasets are placed
    for path in sorted((REPO / "config").glob("*.yaml")):
        if path.name == "config.schema.yaml":
            continue
        place_local_datasets(yaml.safe_load(path.read_text()))
        written = expand_config(yaml.safe_load(path.read_text()))
        as_written = validate_config(written, SCHEMA)
        reordered = validate_config(reversed_keys(written), SCHEMA)
        assert repr(reordered) == repr(as_written), path.name
        plans = Plan(as_written, REPO), Plan(reordered, REPO)
        for model in as_written["models"]:
            assert len({repr(plan.model_result_settings(model)) for plan in plans}) == 1


def test_a_filter_that_is_off_decides_no_params():
    """Issue 38's upgrade: a new setting of the quality filters (Arctic's symbol count) reran
    every filter job, and every embedding and run after it, although the filter was off.
    The filter's params are what decides the corpus: a filter that is off has no settings."""
    wildcards = SimpleNamespace(dataset="d")
    off = plan_of(filter={"quality": {"symbols_per_word": {"max": 0.2}}})
    changed_while_off = plan_of(
        filter={"quality": {"symbols_per_word": {"max": 0.5, "count": "gopher"}}}
    )
    assert off.filter_rules(wildcards) == changed_while_off.filter_rules(wildcards)
    assert off.filter_rules(wildcards)["quality"] == {}
    on = plan_of(filter={"quality": {"symbols_per_word": {"enabled": True, "max": 0.5}}})
    assert on.filter_rules(wildcards)["quality"] == {
        "below": "strict",
        "symbols_per_word": {"enabled": True, "max": 0.5, "count": "arctic"},
    }
