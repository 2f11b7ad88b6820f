"""What the quality-control jobs (irflow.workflow.kinds.quality_control, ``plan.kinds``) and the
label-audit jobs (irflow.workflow.qc_inputs, a part of ``Plan``) read, on small validated
configs, without running Snakemake."""

from types import SimpleNamespace

from test_inputs import plan_of


def qc_plan(generate=None, quality_control=None, **config):
    """``d`` with BM25 and a dense retriever of model ``m``; generated ``gen`` and its QC'd copy
    ``gen-qc`` (candidates from BM25), voted on by a bi-encoder of ``m`` and a cross-encoder;
    ``d``'s labels audited."""
    return plan_of(
        models={"m": {"id": "org/m"}},
        retrievers={"bm25": {"type": "bm25"}, "mini": {"type": "dense", "model": "m"}},
        rerankers={
            "bi": {"type": "bi-encoder", "model": "m"},
            "ce": {"type": "cross-encoder", "id": "org/ce"},
        },
        generate={"gen": {"dataset": "d"} | (generate or {})},
        llm={"model": "fake"},
        quality_control={
            "rerankers": ["bi", "ce"],
            "generated": {"gen-qc": {"dataset": "gen", "retriever": "bm25", "depth": 50}},
            "label_audit": {"datasets": ["d"]},
        }
        | (quality_control or {}),
        **config,
    )


def test_qc_candidates_retrieve_the_other_checked_splits_with_the_qc_retriever():
    quality_control = qc_plan().kinds["quality_control"]
    # gen scores its test split; its dev split (dev_share 0.2) is retrieved by qc_candidates.
    assert quality_control.other_splits("gen-qc") == ["dev"]
    wildcards = SimpleNamespace(dataset="gen-qc", split="dev")
    assert quality_control.spec(wildcards)["retriever"] == "bm25"
    assert quality_control.candidates_inputs(wildcards) == {
        "source": "results/datasets/gen/source.json",
        "queries": "results/datasets/gen/queries.parquet",
        "qrels": "results/datasets/gen/qrels/dev.parquet",
        "index": "results/indexes/gen/bm25.bm25s",
    }
    retrieval = quality_control.candidates_retrieval(wildcards)
    assert (retrieval["top_k"], retrieval["remove_self_matches"]) == (50, False)
    assert retrieval["retriever"] == quality_control.config["retrievers"]["bm25"]


def test_a_split_the_generation_leaves_empty_is_not_retrieved():
    quality_control = qc_plan(generate={"dev_share": 0}).kinds["quality_control"]
    assert quality_control.other_splits("gen-qc") == []
    scored_dev = qc_plan(generate={"dev_share": 1, "split": "dev"}).kinds["quality_control"]
    assert scored_dev.other_splits("gen-qc") == []


def test_qc_votes_read_the_run_the_other_splits_candidates_and_reuse_dense_vectors():
    quality_control = qc_plan().kinds["quality_control"]
    votes = quality_control.votes_inputs(SimpleNamespace(dataset="gen-qc", reranker="bi"))
    assert votes == {
        "source": "results/datasets/gen/source.json",
        "corpus": "results/datasets/gen/filtered/corpus.parquet",
        # every split's queries: the filtered ones are the scored split's only
        "queries": "results/datasets/gen/queries.parquet",
        "runs": ["results/runs/gen/bm25.parquet"],
        "split_runs": ["results/qc/gen-qc/candidates/dev.parquet"],
        "embeddings": "results/embeddings/gen/m/corpus.parquet",
        "query_embeddings": "results/embeddings/gen/m/queries.parquet",
        "query_manifest": "results/manifests/embed/gen/m/queries.json",
    }
    # Only the scored split checked: the filtered queries, no candidates; a cross-encoder has
    # no vectors to reuse.
    scored_only = qc_plan(quality_control={"generated": {"gen-qc": {"dataset": "gen",
        "retriever": "bm25", "splits": ["test"]}}})  # fmt: skip
    wildcards = SimpleNamespace(dataset="gen-qc", reranker="ce")
    votes = scored_only.kinds["quality_control"].votes_inputs(wildcards)
    assert votes == {
        "source": "results/datasets/gen/source.json",
        "corpus": "results/datasets/gen/filtered/corpus.parquet",
        "queries": "results/datasets/gen/filtered/queries.parquet",
        "runs": ["results/runs/gen/bm25.parquet"],
    }


def test_quality_control_reads_the_generation_and_every_rerankers_votes():
    inputs = qc_plan().kinds["quality_control"].inputs(SimpleNamespace(dataset="gen-qc"))
    assert inputs == {
        "base_source": "results/datasets/gen/source.json",
        "corpus": "results/datasets/gen/corpus.parquet",
        "queries": "results/datasets/gen/queries.parquet",
        "qrels_dev": "results/datasets/gen/qrels/dev.parquet",
        "qrels_test": "results/datasets/gen/qrels/test.parquet",
        "negatives": "results/datasets/gen/generation/negatives.parquet",
        "votes": ["results/qc/gen-qc/votes/bi.parquet", "results/qc/gen-qc/votes/ce.parquet"],
        "prompts": "config/prompts/judge.yaml",
    }


def test_the_label_audit_pools_every_system_unless_it_names_some():
    plan = qc_plan()
    assert plan.audit_systems() == plan.systems == ["bm25", "mini"]
    runs = ["results/runs/d/bm25.parquet", "results/runs/d/mini.parquet"]
    wildcards = SimpleNamespace(dataset="d", reranker="ce")
    assert plan.audit_votes_inputs(wildcards) == {
        "source": "results/datasets/d/source.json",
        "corpus": "results/datasets/d/filtered/corpus.parquet",
        "queries": "results/datasets/d/filtered/queries.parquet",
        "runs": runs,
    }
    audit = plan.label_audit_inputs(wildcards)
    assert audit["qrels"] == "results/datasets/d/qrels.parquet" and audit["runs"] == runs
    assert audit["votes"] == [
        "results/audit/d/votes/bi.parquet",
        "results/audit/d/votes/ce.parquet",
    ]
    assert audit["prompts"] == []  # no judge: only the votes decide
    named = qc_plan(
        quality_control={"label_audit": {"datasets": ["d"], "systems": ["mini"], "judge": True}}
    )
    assert named.audit_systems() == ["mini"]
    audit = named.label_audit_inputs(wildcards)
    assert audit["runs"] == ["results/runs/d/mini.parquet"]
    assert audit["prompts"] == [named.judge_prompts()]
