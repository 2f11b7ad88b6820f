"""Variance over seeds (issue 50 item 10): every step that samples (generate, positionalize, the
subsampling of benchmark agreement) takes one seed or a list of them; each seed's datasets and
rows are kept, with their seed, and the tables show the mean ± sd over the seeds. One seed, or
a list of one, makes the datasets it made before, with the same parameters. (The workflow's dry
runs: test_generate.py, test_the_workflow_evaluates_a_generated_dataset.)"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from test_correlate import bootstrap_per_query
from test_positionalize import (
    CORPUS,
    DEFAULT_BM25,
    LENGTH,
    QRELS,
    QUERIES,
    fillers_of,
    haystack,
    make,
    word_tokenizer,
)

from irflow.analyses.correlate import bootstrap_correlation, summarize_bootstrap
from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.derived.generate.sampling import sample_documents
from irflow.derived.positionalize import Positionalizer, parse_variant
from irflow.evaluation.aggregate import build_database
from irflow.evaluation.results import ResultFiles, write_results
from irflow.evaluation.tables import TableLayout
from irflow.workflow.config import load_schema, validate_config
from irflow.workflow.run_inputs import Plan

SCHEMA = load_schema(REPO / "config" / "config.schema.yaml")
GENERATED = "generated benchmarks"


def sampled(seed) -> dict:
    """A config whose three sampling steps each take ``seed``."""
    return {
        "datasets": {"scifact": {"source": {"type": "url", "url": "https://example.org/d.zip"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
        "models": {"m": {"id": "org/m"}},
        "llm": {"model": "fake"},
        "generate": {"gen": {"dataset": "scifact", "seed": seed}},
        "positionalize": {
            "pos": {
                "dataset": "scifact",
                "tokenizer": "m",
                "lengths": [512],
                "positions": [0, 1.0],
                "seed": seed,
            }
        },
        "correlation": {
            "benchmarks": {"real": ["scifact"], "made": ["gen"]},
            "bootstrap": {"left": "real", "right": "made", "seed": seed},
        },
    }


def test_each_sampling_step_takes_one_seed_or_a_list_of_them():
    """(Before: `seed` was one integer; a list was refused, "is not of type 'integer'".)"""
    config = validate_config(sampled([0, 1, 2]), SCHEMA)
    assert config["generate"]["gen"]["seed"] == [0, 1, 2]
    assert config["positionalize"]["pos"]["seed"] == [0, 1, 2]
    assert config["correlation"]["bootstrap"]["seed"] == [0, 1, 2]
    # One integer stays one integer, as written: the jobs' parameters are today's.
    assert validate_config(sampled(4), SCHEMA)["generate"]["gen"]["seed"] == 4
    for bad in ([], [1, 1], [0, -1], -1, "many"):
        with pytest.raises(ConfigError) as refused:
            validate_config(sampled(bad), SCHEMA)
        for key in ("generate.gen.seed", "positionalize.pos.seed", "correlation.bootstrap.seed"):
            assert key in str(refused.value), (bad, str(refused.value))


def test_a_list_of_seeds_makes_one_dataset_per_seed_the_first_under_its_own_name():
    """(Before: refused by the schema.)"""
    plan = Plan(validate_config(sampled([0, 3]), SCHEMA), REPO)
    assert sorted(plan.kinds["generate"].datasets) == ["gen", "gen@seed3"]
    assert plan.kinds["generate"].datasets["gen@seed3"] == plan.kinds["generate"].datasets[
        "gen"
    ] | {"seed": 3}
    assert {name: spec["seed"] for name, spec in plan.kinds["positionalize"].datasets.items()} == {
        "pos@L512@p0": 0,
        "pos@L512@p1": 0,
        "pos@seed3@L512@p0": 3,
        "pos@seed3@L512@p1": 3,
    }
    # Each seed's variants are a block of their own (its position analysis), and their names
    # read back.
    assert plan.kinds["positionalize"].datasets["pos@seed3@L512@p1"]["block"] == "pos@seed3"
    assert parse_variant("pos@seed3@L512@p1") == ("pos@seed3", 512, 1.0)
    assert set(plan.kinds["generate"].datasets) | set(plan.kinds["positionalize"].datasets) <= set(
        plan.datasets
    )
    layout = plan.table_layout
    assert layout["seeds"] == {
        "gen": {"of": "gen", "seed": 0},
        "gen@seed3": {"of": "gen", "seed": 3},
        "pos@L512@p0": {"of": "pos@L512@p0", "seed": 0},
        "pos@seed3@L512@p0": {"of": "pos@L512@p0", "seed": 3},
        "pos@L512@p1": {"of": "pos@L512@p1", "seed": 0},
        "pos@seed3@L512@p1": {"of": "pos@L512@p1", "seed": 3},
    }
    assert layout["derived"]["gen@seed3"] == {"base": "scifact", "kind": GENERATED}


def test_one_seed_plans_as_before_and_a_new_seed_leaves_the_first_seeds_jobs_alone():
    """A list of one seed is the integer: the same datasets and the same parameters for every
    job (Snakemake compares their repr), the tables' layout without seeds. Adding a seed adds
    only that seed's datasets and gives the first seed's jobs the parameters they had.
    (Before: a list was refused.)"""
    today = Plan(validate_config(sampled(0), SCHEMA), REPO)
    listed = Plan(validate_config(sampled([0]), SCHEMA), REPO)
    grown = Plan(validate_config(sampled([0, 1]), SCHEMA), REPO)
    assert "seeds" not in today.table_layout
    for plan in (listed, grown):
        for name in today.kinds["generate"].datasets:
            assert repr(plan.kinds["generate"].datasets[name]) == repr(
                today.kinds["generate"].datasets[name]
            )
        for name in today.kinds["positionalize"].datasets:
            assert repr(plan.kinds["positionalize"].datasets[name]) == repr(
                today.kinds["positionalize"].datasets[name]
            )
    assert repr(listed.table_layout) == repr(today.table_layout)
    assert listed.datasets == today.datasets
    assert sorted(set(grown.datasets) - set(today.datasets)) == [
        "gen@seed1",
        "pos@seed1@L512@p0",
        "pos@seed1@L512@p1",
    ]


def test_two_seeds_draw_two_sets_of_fillers_documents_and_subsamples():
    """Each seed's dataset is sampled with its own seed: different fillers in the haystacks,
    different documents to generate from, different subsampling draws; the first seed's are
    those of one seed. (Before: one seed only.)"""
    plan = Plan(validate_config(sampled([0, 3]), SCHEMA), REPO)
    tokenizer = word_tokenizer()
    fillers = {}
    for name in ("pos@L512@p0", "pos@seed3@L512@p0"):
        spec = plan.kinds["positionalize"].datasets[name]
        maker = Positionalizer(
            CORPUS, QUERIES, QRELS, tokenizer, spec["fillers"], spec["seed"], bm25=DEFAULT_BM25
        )
        fillers[name] = fillers_of(*haystack(maker.variant(LENGTH, 0.5)))
    assert fillers["pos@L512@p0"] != fillers["pos@seed3@L512@p0"]
    assert fillers["pos@L512@p0"] == fillers_of(*haystack(make(tokenizer).variant(LENGTH, 0.5)))

    corpus = pd.DataFrame(
        {"doc_id": [f"d{i}" for i in range(60)], "title": "", "text": "a few words here"}
    )
    documents = {
        name: sample_documents(corpus, 5, spec["seed"], None, 1)[0]
        for name, spec in plan.kinds["generate"].datasets.items()
    }
    assert documents["gen"] != documents["gen@seed3"]
    assert documents["gen"] == sample_documents(corpus, 5, 0, None, 1)[0]

    per_query = bootstrap_per_query()
    draws = bootstrap_correlation(
        per_query, "m", ["d1", "d2"], ["d3"], resamples=20, sample_size=8, seed=[1, 2]
    )
    assert draws.groupby("seed").size().to_dict() == {1: 20, 2: 20}
    for seed in (1, 2):
        alone = bootstrap_correlation(
            per_query, "m", ["d1", "d2"], ["d3"], resamples=20, sample_size=8, seed=seed
        )
        assert (alone["seed"] == seed).all()
        pd.testing.assert_frame_equal(draws[draws["seed"] == seed].reset_index(drop=True), alone)
    assert not np.array_equal(
        draws.loc[draws["seed"] == 1, "spearman"], draws.loc[draws["seed"] == 2, "spearman"]
    )
    spread = summarize_bootstrap(draws)
    means = draws.groupby("seed")["spearman"].mean()
    assert spread["seeds"] == 2
    assert spread["spearman_seeds_mean"] == pytest.approx(means.mean())
    assert spread["spearman_seeds_sd"] == pytest.approx(np.std(means.to_numpy(), ddof=1))
    assert spread["spearman_mean"] == pytest.approx(draws["spearman"].mean())
    # One seed's draws are summarised as before, without a spread over seeds.
    assert "seeds" not in summarize_bootstrap(draws[draws["seed"] == 1])


SEEDS = {"gen": 0, "gen@seed1": 1, "gen@seed2": 2}


def scored_seeds(folder, missing: tuple[str, str] | None = None):
    """Per-query nDCG@10 of two systems on scifact and three seeds of a generated dataset,
    drawn at random, as score files; (dataset, system, path) each."""
    rng = np.random.default_rng(7)
    scores = []
    for dataset in ["scifact", *SEEDS]:
        for system in ("bm25", "dense"):
            if (dataset, system) == missing:
                continue
            path = folder / "scores" / dataset / f"{system}.parquet"
            values = rng.uniform(0, 1, 12)
            frame = pd.DataFrame(
                {"query_id": [f"q{i}" for i in range(12)], "metric": "ndcg_cut_10", "value": values}
            )
            contracts.write_frame(frame, path, contracts.PER_QUERY)
            scores.append((dataset, system, path))
    return scores


def seeds_layout(**extra) -> TableLayout:
    derived = {name: {"base": "scifact", "kind": GENERATED} for name in SEEDS}
    return TableLayout(benchmark={"scifact": None}, derived=derived, **extra)


def write(folder, scores, layout) -> pd.DataFrame:
    files = ResultFiles.in_folder(folder)
    published = REPO / "config" / "reference" / "published.yaml"
    return write_results(scores, published, files, ["ndcg_cut_10"], layout, {})


def test_the_tables_show_the_mean_and_sd_over_seeds_and_the_summary_keeps_each_seeds_rows(
    tmp_path,
):
    """The generated dataset's three seeds are one column of its table, each cell the mean ±
    the sample sd of the system's three values, as pandas and numpy compute them from the
    summary's rows; the summary and the database keep each seed's rows with their seed.
    (Before: the summary had no seed and the table a column per seed.)"""
    seeds = {name: {"of": "gen", "seed": seed} for name, seed in SEEDS.items()}
    summary = write(tmp_path, scored_seeds(tmp_path), seeds_layout(seeds=seeds))
    written = contracts.read_frame(tmp_path / "summary.parquet")
    pd.testing.assert_frame_equal(written, summary, check_dtype=False)
    assert written.set_index("dataset")["seed"].dropna().astype(int).to_dict() == SEEDS
    assert written.loc[written["dataset"] == "scifact", "seed"].isna().all()

    rows = written[written["seed"].notna()]
    assert len(rows) == 6  # each seed's rows, for each system
    by_system = rows.groupby("system")["value"]
    table = pd.read_csv(tmp_path / "tables" / "ndcg_cut_10" / "scifact.generated_benchmarks.csv")
    assert list(table.columns) == ["system", "scifact", "gen (3 seeds)"]
    text = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| system | scifact | gen (3 seeds) |" in text
    for system, values in by_system:
        values = values.to_numpy()
        mean, sd = by_system.mean()[system], by_system.std()[system]
        assert mean == pytest.approx(np.mean(values))
        assert sd == pytest.approx(np.std(values, ddof=1))
        cell = f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"
        assert table.set_index("system").loc[system, "gen (3 seeds)"] == cell
        assert cell in text
    assert "over seeds 0, 1, 2 (gen, gen@seed1, gen@seed2)" in text

    database = tmp_path / "irflow.duckdb"
    build_database(database, {"summary": [tmp_path / "summary.parquet"]})
    with duckdb.connect(str(database), read_only=True) as db:
        # docs/metrics.md's query: the first seed's name, each system's mean and sd.
        spread = db.execute(
            "SELECT regexp_replace(dataset, '@seed[0-9]+', '') AS made, system, avg(value), "
            "stddev_samp(value), count(DISTINCT seed) FROM summary WHERE seed IS NOT NULL "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    assert [(made, system, n) for made, system, _, _, n in spread] == [
        ("gen", "bm25", 3),
        ("gen", "dense", 3),
    ]
    for _, system, mean, sd, _ in spread:
        assert (mean, sd) == pytest.approx((by_system.mean()[system], by_system.std()[system]))


def test_a_system_lacking_a_seed_gets_no_mean_and_a_note(tmp_path):
    seeds = {name: {"of": "gen", "seed": seed} for name, seed in SEEDS.items()}
    write(tmp_path, scored_seeds(tmp_path, ("gen@seed2", "dense")), seeds_layout(seeds=seeds))
    table = pd.read_csv(tmp_path / "tables" / "ndcg_cut_10" / "scifact.generated_benchmarks.csv")
    assert table.set_index("system")["gen (3 seeds)"].isna().tolist() == [False, True]
    text = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "- gen (3 seeds): none for dense, lacking a seed's value." in text


def test_datasets_of_one_seed_are_shown_as_before(tmp_path):
    """Without seeds in the layout (a config of one seed per step) each dataset is a column of
    its own, with its value, and the summary's seed is null."""
    summary = write(tmp_path, scored_seeds(tmp_path), seeds_layout())
    assert summary["seed"].isna().all()
    table = pd.read_csv(tmp_path / "tables" / "ndcg_cut_10" / "scifact.generated_benchmarks.csv")
    assert list(table.columns) == ["system", "scifact", *SEEDS]
    values = summary.pivot(index="system", columns="dataset", values="value")
    np.testing.assert_allclose(table.set_index("system")[list(SEEDS)], values[list(SEEDS)], 1e-6)
    assert "seeds" not in (tmp_path / "results.md").read_text(encoding="utf-8")
