from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import REPO, validated
from test_aggregate import run_scripts

from irflow.analyses.correlate import (
    BOOTSTRAP_COLUMNS,
    PAIR_COLUMNS,
    against_reference,
    between_benchmarks,
    between_buckets,
    between_datasets,
    between_metrics,
    bootstrap_correlation,
    corpus_similarity,
    load_reference,
    published_ranking,
    rank_correlation,
    similarity_stopwords,
    summarize_bootstrap,
    unigram_counts,
    weighted_jaccard,
)
from irflow.core.contracts import document_texts
from irflow.core.errors import ConfigError

SYSTEMS = ["bm25", "contriever", "dpr", "e5", "tas-b"]


def summary_frame(scores: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    """Summary rows from {(dataset, metric): one score per system in SYSTEMS}."""
    return pd.DataFrame(
        [
            (dataset, system, metric, float(value), 100)
            for (dataset, metric), values in scores.items()
            for system, value in zip(SYSTEMS, values)
        ],
        columns=["dataset", "system", "metric", "value", "queries"],
    )


def test_ranking_with_itself_and_reversed():
    scores = pd.Series([0.1, 0.4, 0.3, 0.9, 0.5], index=SYSTEMS)
    same = rank_correlation(scores, scores)
    assert same["systems"] == 5
    assert same["spearman"] == pytest.approx(1.0) and same["kendall"] == pytest.approx(1.0)
    reversed_ = rank_correlation(scores, -scores)
    assert reversed_["spearman"] == pytest.approx(-1.0)
    assert reversed_["kendall"] == pytest.approx(-1.0)


def test_one_swap_of_four_matches_the_formulas():
    a = pd.Series([1.0, 2.0, 3.0, 4.0], index=["w", "x", "y", "z"])
    # Reordered index and an extra system only b has: aligned on the common four.
    b = pd.Series([4.0, 3.0, 2.0, 1.0, 9.0], index=["z", "y", "w", "x", "only_b"])
    result = rank_correlation(a, b)
    assert result["systems"] == 4
    # rho = 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6 * 2 / 60
    assert result["spearman"] == pytest.approx(0.8)
    # tau = (concordant - discordant) / pairs = (5 - 1) / 6
    assert result["kendall"] == pytest.approx(2 / 3)
    assert 0 < result["spearman_p"] < 1 and 0 < result["kendall_p"] < 1


def test_too_few_systems_is_nan():
    a = pd.Series([1.0, 2.0, 3.0], index=["x", "y", "z"])
    result = rank_correlation(a, a.drop("z"))
    assert result["systems"] == 2
    assert np.isnan(result["spearman"]) and np.isnan(result["kendall_p"])


def test_between_datasets_is_a_symmetric_matrix_without_self_pairs():
    rng = np.random.default_rng(0)
    summary = summary_frame({(d, "ndcg_cut_10"): rng.uniform(0, 1, 5) for d in ["a", "b", "c"]})
    result = between_datasets(summary, "ndcg_cut_10")
    assert list(result.columns) == PAIR_COLUMNS
    assert len(result) == 6 and not (result["left"] == result["right"]).any()
    for column in ("spearman", "kendall"):
        matrix = result.pivot(index="left", columns="right", values=column)
        assert np.isnan(np.diag(matrix)).all()
        np.testing.assert_allclose(matrix, matrix.T)
    assert (result["systems"] == 5).all()
    with pytest.raises(ValueError, match="not computed"):
        between_datasets(summary, "map")


def test_one_system_gives_no_self_correlation_rows():
    """One system on one dataset: no dataset pair to correlate, and no 'scifact~scifact' row
    of NULLs; metric pairs have their one system counted and no value."""
    summary = summary_frame({("scifact", "map"): [0.5], ("scifact", "ndcg_cut_10"): [0.6]})
    assert between_datasets(summary, "map").empty
    metrics = between_metrics(summary)
    assert metrics[["left", "right", "systems"]].values.tolist() == [
        ["map", "ndcg_cut_10", 1],
        ["ndcg_cut_10", "map", 1],
    ]
    assert metrics["spearman"].isna().all()


def test_between_metrics_uses_the_mean_over_datasets():
    summary = summary_frame(
        {
            ("d1", "m1"): [1, 2, 3, 4, 5],
            ("d2", "m1"): [1, 2, 3, 4, 5],
            ("d1", "m2"): [5, 4, 3, 2, 1],
            # d2 flips m2's order with larger values, so the mean agrees with m1.
            ("d2", "m2"): [10, 20, 30, 40, 50],
        }
    )
    on_d1 = between_metrics(summary, "d1").set_index(["left", "right"])
    assert on_d1.loc[("m1", "m2"), "spearman"] == pytest.approx(-1.0)
    overall = between_metrics(summary).set_index(["left", "right"])
    assert overall.loc[("m1", "m2"), "spearman"] == pytest.approx(1.0)
    assert overall.loc[("m2", "m1"), "kendall"] == pytest.approx(1.0)


def test_between_benchmarks_uses_group_means():
    summary = summary_frame(
        {
            ("d1", "m"): [5, 4, 3, 2, 1],
            ("d2", "m"): [10, 20, 30, 40, 50],
            ("d3", "m"): [1, 2, 3, 4, 5],
            ("d4", "m"): [3, 1, 2, 5, 4],
        }
    )
    result = between_benchmarks(summary, {"g1": ["d1", "d2"], "g2": ["d3"], "g3": ["d4"]}, "m")
    assert list(result.columns) == PAIR_COLUMNS
    assert len(result) == 6
    result = result.set_index(["left", "right"])
    assert result.loc[("g1", "g2"), "spearman"] == pytest.approx(1.0)
    assert ("g1", "g1") not in result.index
    # g3 ranks [3, 1, 2, 5, 4]: sum d^2 = 4 + 1 + 1 + 1 + 1 = 8, rho = 1 - 48 / 120.
    assert result.loc[("g2", "g3"), "spearman"] == pytest.approx(0.6)
    assert between_datasets(summary, "m").set_index(["left", "right"]).loc[
        ("d1", "d3"), "spearman"
    ] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="'g9'"):
        between_benchmarks(summary, {"g9": ["nope"]}, "m")


def write_reference(tmp_path, text: str):
    path = tmp_path / "mteb.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_against_reference(tmp_path):
    summary = summary_frame(
        {
            ("nfcorpus", "ndcg_cut_10"): [0.30, 0.32, 0.25, 0.37, 0.35],
            ("scifact", "ndcg_cut_10"): [0.66, 0.65, 0.32, 0.72, 0.64],
            ("fiqa", "ndcg_cut_10"): [0.2, 0.3, 0.1, 0.4, 0.3],
        }
    )
    lines = ["system,benchmark,score,extra"]
    published_nfcorpus = [0.31, 0.33, 0.26, 0.38, 0.36]  # same order as irflow
    published_scifact = [0.66, 0.68, 0.40, 0.75, 0.62]  # bm25 and contriever swapped
    for system, nf, sf in zip(SYSTEMS, published_nfcorpus, published_scifact):
        lines += [f"{system},nfcorpus,{nf},x", f"{system},scifact,{sf},x", f"{system},arguana,1,x"]
    reference = load_reference(write_reference(tmp_path, "\n".join(lines) + "\n"))
    assert list(reference.columns) == ["system", "benchmark", "score"]

    result = against_reference(summary, reference, "ndcg_cut_10").set_index("benchmark")
    assert list(result.index) == ["nfcorpus", "scifact", "(mean)"]
    assert result.loc["nfcorpus", "spearman"] == pytest.approx(1.0)
    # scifact: one adjacent swap of 5, rho = 1 - 6 * 2 / 120 and tau = (9 - 1) / 10.
    assert result.loc["scifact", "spearman"] == pytest.approx(0.9)
    assert result.loc["scifact", "kendall"] == pytest.approx(0.8)
    ours = summary[summary["dataset"] != "fiqa"].groupby("system")["value"].mean()
    theirs = reference[reference["benchmark"] != "arguana"].groupby("system")["score"].mean()
    expected = rank_correlation(ours, theirs)
    assert result.loc["(mean)", "spearman"] == pytest.approx(expected["spearman"])
    assert result.loc["(mean)", "systems"] == 5


def test_load_reference_errors(tmp_path):
    missing = write_reference(tmp_path, "system,benchmark,value\ne5,nfcorpus,0.3\n")
    with pytest.raises(ValueError, match=r"mteb\.csv: missing column 'score'"):
        load_reference(missing)
    duplicate = write_reference(
        tmp_path,
        "system,benchmark,score\ne5,nfcorpus,0.3\ne5,scifact,0.7\ne5,nfcorpus,0.31\n",
    )
    with pytest.raises(ValueError, match=r"mteb\.csv, line 4: duplicate .*'e5'.*'nfcorpus'"):
        load_reference(duplicate)
    not_a_number = write_reference(tmp_path, "system,benchmark,score\ne5,nfcorpus,n/a%\n")
    with pytest.raises(ValueError, match="line 2"):
        load_reference(not_a_number)


def bootstrap_per_query(seed: int = 0) -> pd.DataFrame:
    """Noisy per-query scores; left = d1 (25 queries) + d2 (15), right = d3."""
    rng = np.random.default_rng(seed)
    quality = dict(zip(SYSTEMS, [0.30, 0.35, 0.40, 0.45, 0.50]))
    rows = [
        (dataset, system, f"q{i}", "m", float(np.clip(quality[system] + rng.normal(0, 0.3), 0, 1)))
        for dataset, queries in [("d1", 25), ("d2", 15), ("d3", 30)]
        for system in SYSTEMS
        for i in range(queries)
    ]
    return pd.DataFrame(rows, columns=["dataset", "system", "query_id", "metric", "value"])


def macro_means(per_query: pd.DataFrame, datasets: list[str]) -> pd.Series:
    """Each system's mean over ``datasets`` of its per-dataset means."""
    chosen = per_query[per_query["dataset"].isin(datasets)]
    per_dataset = chosen.groupby(["system", "dataset"])["value"].mean().unstack("dataset")
    return per_dataset.mean(axis=1, skipna=False)


def test_bootstrap_with_every_query_equals_the_full_correlation(caplog):
    per_query = bootstrap_per_query()
    # dpr has no d2 scores: like every group score, its mean over d1 and d2 is undefined.
    per_query = per_query[~((per_query["system"] == "dpr") & (per_query["dataset"] == "d2"))]
    draws = bootstrap_correlation(
        per_query, "m", ["d1", "d2"], ["d3"], resamples=5, sample_size=1000
    )
    assert list(draws.columns) == BOOTSTRAP_COLUMNS
    assert list(draws["draw"]) == [0, 1, 2, 3, 4]
    assert (draws["sampled_queries"] == 40).all() and (draws["whole_datasets"] == 2).all()
    assert draws["every_query"].all()
    assert "holds every query of d1, d2; all 5 draws are identical" in caplog.text
    expected = rank_correlation(
        macro_means(per_query, ["d1", "d2"]), macro_means(per_query, ["d3"])
    )
    assert expected["systems"] == 4
    np.testing.assert_allclose(draws["spearman"], expected["spearman"])
    np.testing.assert_allclose(draws["kendall"], expected["kendall"])


def two_and_eight_queries() -> pd.DataFrame:
    """The issue's example: left = a 2-query and an 8-query dataset, right = one dataset.

    Per dataset means: small x 1.0, y 1.0, z 0.0; large x 0.5, y 0.4, z 0.9 (each query
    within 0.05 of it). Macro means x 0.75 > y 0.70 > z 0.45, the right group's order; pooled
    over the 10 queries z 0.72 > x 0.60 > y 0.52, a Spearman of -0.5 against it.
    """
    jitter = np.linspace(-0.05, 0.05, 8)
    scores = {
        "small": {"x": [1.0, 1.0], "y": [1.0, 1.0], "z": [0.0, 0.0]},
        "large": {"x": 0.5 + jitter, "y": 0.4 + jitter, "z": 0.9 + jitter[::-1]},
        "right": {"x": [0.9], "y": [0.5], "z": [0.1]},
    }
    return pd.DataFrame(
        [
            (dataset, system, f"q{i}", "m", float(value))
            for dataset, systems in scores.items()
            for system, values in systems.items()
            for i, value in enumerate(values)
        ],
        columns=["dataset", "system", "query_id", "metric", "value"],
    )


def test_bootstrap_macro_averages_like_the_group_scores(caplog):
    per_query = two_and_eight_queries()
    summary = per_query.groupby(["dataset", "system", "metric"], as_index=False)["value"].mean()
    groups = {"left": ["small", "large"], "right": ["right"]}
    between = between_benchmarks(summary, groups, "m").set_index(["left", "right"])
    assert between.loc[("left", "right"), "spearman"] == pytest.approx(1.0)
    pooled = per_query[per_query["dataset"] != "right"].groupby("system")["value"].mean()
    assert rank_correlation(pooled, macro_means(per_query, ["right"]))["spearman"] == (
        pytest.approx(-0.5)
    )

    # A draw holding every query is the group score itself: 1.0, not the pooled -0.5.
    every = bootstrap_correlation(
        per_query, "m", groups["left"], groups["right"], resamples=3, sample_size=8
    )
    assert (every["sampled_queries"] == 10).all() and every["every_query"].all()
    np.testing.assert_allclose(every["spearman"], 1.0)

    # Two queries of each dataset: the small one whole, the large one subsampled. Every
    # such draw keeps the macro order; a pooled draw of 4 of the 10 queries would not.
    caplog.clear()
    draws = bootstrap_correlation(
        per_query, "m", groups["left"], groups["right"], resamples=50, sample_size=2, seed=1
    )
    assert (draws["sampled_queries"] == 4).all() and (draws["whole_datasets"] == 1).all()
    assert not draws["every_query"].any()
    assert "holds every query of small; their means never vary" in caplog.text
    np.testing.assert_allclose(draws["spearman"], 1.0)
    np.testing.assert_allclose(draws["kendall"], 1.0)


def test_bootstrap_is_seeded():
    per_query = bootstrap_per_query()

    def run(seed):
        return bootstrap_correlation(
            per_query, "m", ["d1", "d2"], ["d3"], resamples=20, sample_size=8, seed=seed
        )

    pd.testing.assert_frame_equal(run(1), run(1))
    assert not run(1).equals(run(2))
    # 8 queries of each of d1 (25) and d2 (15): neither is drawn whole.
    assert (run(1)["sampled_queries"] == 16).all() and (run(1)["whole_datasets"] == 0).all()
    assert run(1)["spearman"].nunique() > 1

    summary = summarize_bootstrap(run(1))
    assert summary["draws"] == 20
    assert summary["spearman_mean"] == pytest.approx(run(1)["spearman"].mean())
    assert summary["kendall_std"] == pytest.approx(run(1)["kendall"].std())
    assert summary["spearman_min"] <= summary["spearman_p5"] <= summary["spearman_p95"]


def test_weighted_jaccard_hand_worked():
    # p = {a: .5, b: .5} vs {a: .25, c: .75}: sum min = .25, sum max = .5 + .5 + .75.
    assert weighted_jaccard(Counter(a=2, b=2), Counter(a=1, c=3)) == pytest.approx(1 / 7)
    assert weighted_jaccard(Counter(a=2, b=2), Counter(a=1, b=1)) == 1.0
    assert weighted_jaccard(Counter(a=3), Counter(b=3)) == 0.0
    assert np.isnan(weighted_jaccard(Counter(), Counter(a=1)))


def test_unigram_counts_arabic_and_stopwords():
    texts = ["في البيت كتاب.", "في المدرسة كتاب و كَتَبَ الوَلَدُ", "The cat, THE hat."]
    counts = unigram_counts(texts, stopwords=frozenset({"في", "the"}))
    assert counts["كتاب"] == 2
    # Vowel marks stay inside the word instead of splitting it.
    assert counts["كَتَبَ"] == 1 and counts["الوَلَدُ"] == 1
    assert "في" not in counts and "the" not in counts
    assert counts["cat"] == 1 and counts["hat"] == 1
    assert sum(counts.values()) == 9


def similarity_words(**correlation) -> str:
    """``correlation.similarity_words`` as the unigrams rule reads it from the validated config."""
    return validated(correlation=correlation)["correlation"]["similarity_words"]


def shared_texts(shared, name: str) -> pd.DataFrame:
    corpus = pd.read_json(shared / name / "corpus.jsonl.gz", lines=True, dtype=str)
    return corpus.rename(columns={"_id": "doc_id"})


def test_scifact_nfcorpus_similarity_sums_over_all_unique_words(tmp_path, shared_datasets):
    """BEIR's appendix F sums "over all unique words": by default the unigrams job (the rule's
    script, with the rule's params) keeps every word, and SciFact-NFCorpus is 0.5507."""
    counts = {}
    for name in ("scifact", "nfcorpus"):
        shared_texts(shared_datasets, name).to_parquet(tmp_path / f"{name}.parquet")
        output = tmp_path / f"{name}-unigrams.parquet"
        job = {
            "input": {"corpus": str(tmp_path / f"{name}.parquet")},
            "output": [str(output)],
            "params": {"words": similarity_words()},
        }
        run_scripts({"unigrams": job})
        table = pq.read_table(output).to_pydict()
        counts[name] = Counter(dict(zip(table["token"], table["count"])))
    assert round(weighted_jaccard(counts["scifact"], counts["nfcorpus"]), 4) == 0.5507


def test_scifact_nfcorpus_similarity_without_english_stopwords(shared_datasets):
    """irflow's named variant leaves out bm25s' English stopwords: 0.4525."""
    stopwords = similarity_stopwords(similarity_words(similarity_words="without_english_stopwords"))
    counts = {}
    for name in ("scifact", "nfcorpus"):
        corpus = shared_texts(shared_datasets, name)
        counts[name] = unigram_counts(document_texts(corpus["title"], corpus["text"]), stopwords)
    assert round(weighted_jaccard(counts["scifact"], counts["nfcorpus"]), 4) == 0.4525


def test_similarity_words_outside_the_variants_is_refused():
    with pytest.raises(ConfigError, match="similarity_words"):
        similarity_words(similarity_words="content_words")


def test_corpus_similarity_is_symmetric_with_unit_diagonal():
    counts = {
        "scifact": Counter(a=2, b=2),
        "nfcorpus": Counter(a=1, c=3),
        "fiqa": Counter(d=1),
    }
    matrix = corpus_similarity(counts)
    assert list(matrix.index) == list(matrix.columns) == ["fiqa", "nfcorpus", "scifact"]
    np.testing.assert_allclose(np.diag(matrix), 1.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix.loc["scifact", "nfcorpus"] == pytest.approx(1 / 7)
    assert matrix.loc["fiqa", "scifact"] == 0.0


def test_each_length_bucket_is_ranked_against_its_base_dataset():
    summary = summary_frame({("scifact", "ndcg_cut_10"): [0.1, 0.2, 0.3, 0.4, 0.5]})
    psi = pd.DataFrame(
        [
            ("scifact-pos", bucket, system, "ndcg_cut_10", value)
            for bucket, values in (("Q1", [1, 2, 3, 4, 5]), ("Q2", [5, 4, 3, 2, 1]))
            for system, value in zip(SYSTEMS, values)
        ],
        columns=["dataset", "bucket", "system", "metric", "mean_ndcg"],
    )
    rows = between_buckets(psi, summary, {"scifact-pos": ["scifact"]}).set_index("left")
    assert rows.loc["scifact-pos Q1", "spearman"] == pytest.approx(1.0)
    assert rows.loc["scifact-pos Q2", "spearman"] == pytest.approx(-1.0)
    assert rows.loc["scifact-pos Q2", "kendall"] == pytest.approx(-1.0)
    assert set(rows["right"]) == {"scifact"} and set(rows["systems"]) == {5}
    assert between_buckets(psi, summary, {}).empty
    with pytest.raises(ValueError, match="'nfcorpus' of 'scifact-pos'"):
        between_buckets(psi, summary, {"scifact-pos": ["nfcorpus"]})


def test_the_pooled_bucket_ranks_systems_by_posirs_overall_score():
    """PosIR's Table 2 correlates its overall nDCG@10, the mean over every query (those without
    a located span too), not the mean of the position bins' means; a bucket Qk's score is its
    bins' mean, as PosIR's nDCG@10(Qk)."""
    from irflow.analyses.position import analyse

    # Per system: 3 queries in bin 0, 1 in bin 19, 2 with no located span.
    values = {"s1": (0.9, 0.1, 0.0), "s2": (0.6, 0.2, 0.6), "s3": (0.3, 0.3, 0.9)}
    rows = pd.DataFrame(
        [
            ("pos", system, "ndcg_cut_10", f"q{i}", value, relpos, 100)
            for system, (start, end, unplaced) in values.items()
            for i, (relpos, value) in enumerate(
                [(0.0, start)] * 3 + [(1.0, end)] + [(np.nan, unplaced)] * 2
            )
        ],
        columns=["dataset", "system", "metric", "query_id", "value", "relpos", "doc_tokens"],
    )
    _, psi = analyse(rows)
    # Bins' means 0.5, 0.4, 0.3; means over every query 2.8/6, 3.2/6, 3.0/6.
    overall = psi[psi["bucket"] == "all"].set_index("system")["mean_ndcg"]
    assert overall.tolist() == pytest.approx([2.8 / 6, 3.2 / 6, 3.0 / 6])
    summary = pd.DataFrame(
        {
            "dataset": "base",
            "system": ["s1", "s2", "s3"],
            "metric": "ndcg_cut_10",
            "value": [0.1, 0.3, 0.2],  # the every-query order: s2, s3, s1
            "queries": 6,
        }
    )
    rows = between_buckets(psi, summary, {"pos": ["base"]}).set_index("left")
    assert rows.loc["pos all", "spearman"] == pytest.approx(1.0)
    assert rows.loc["pos Q1", "spearman"] == pytest.approx(-0.5)  # bins' means: s1, s2, s3


# bm25 with the schema's defaults: bm25s's published settings (config/reference/published.yaml).
BM25_DEFAULTS = {
    "family": "bm25",
    "method": "lucene",
    "k1": 0.9,
    "b": 0.4,
    "stemmer": "english",
    "stopwords": "en",
    "fields": "title+text",
}


def test_each_length_bucket_is_ranked_against_a_published_ranking():
    """PosIR's Table 2 ranks each bucket against an outside benchmark: "We then compute
    Spearman correlations between MMTEB and the average performance of models within each
    length bucket" (posir.txt, line 67). irflow's outside ranking: each system's published
    nDCG@10 in config/reference/published.yaml, averaged over datasets this run never scores
    (ArguAna and SCIDOCS here). Before, a bucket was compared with its base dataset only."""
    from irflow.evaluation.published import load_published

    entries = load_published(REPO / "config" / "reference" / "published.yaml")
    identities = {
        "bm25": BM25_DEFAULTS,
        "minilm": {"family": "dense", "model": "sentence-transformers/all-MiniLM-L6-v2"},
        "bge": {"family": "dense", "model": "BAAI/bge-small-en-v1.5"},
        "e5": {"family": "dense", "model": "intfloat/e5-small-v2"},
        "fused": {"family": "fusion"},  # nothing published: left out
    }
    published = published_ranking(entries, identities, ["arguana", "scidocs"], "ndcg_cut_10")
    assert published.name == "published (arguana, scidocs)"
    # Each system's value on each dataset, found here by reading the file: the first entry, in
    # the file's order, that is a reproduction (no `differs`) of that system, else the first of
    # it (bge-small has two reproductions of ArguAna: the first counts).

    def first_value(identity: dict, dataset: str) -> float:
        found = [
            entry
            for entry in entries
            if entry["dataset"] == dataset
            and entry["metric"] == "ndcg_cut_10"
            and not entry.get("judgements")
            and entry["system"]["family"] == identity["family"]
            and entry["system"].get("model") == identity.get("model")
            and all(
                identity.get(key) == value
                for key, value in (entry["system"].get("settings") or {}).items()
                if key in identity
            )
        ]
        reproduced = [entry for entry in found if entry["differs"] is None]
        return float((reproduced or found)[0]["value"])

    expected = {
        name: np.mean([first_value(identities[name], d) for d in ("arguana", "scidocs")])
        for name in ("bge", "bm25", "e5", "minilm")
    }
    expected = dict(sorted((expected | {"fused": np.nan}).items()))
    assert len({round(value, 6) for value in expected.values() if value == value}) == 4
    pd.testing.assert_series_equal(
        published, pd.Series(expected, name=published.name).rename_axis("system"), rtol=1e-9
    )
    # The published order: bm25 < e5 < minilm < bge. Q1 agrees, Q2 reverses it.
    order = {"bm25": 1, "e5": 2, "minilm": 3, "bge": 4, "fused": 0}
    psi = pd.DataFrame(
        [
            ("pos", bucket, system, "ndcg_cut_10", sign * rank)
            for bucket, sign in (("Q1", 1), ("Q2", -1))
            for system, rank in order.items()
        ],
        columns=["dataset", "bucket", "system", "metric", "mean_ndcg"],
    )
    summary = summary_frame({("sub", "ndcg_cut_10"): [0.1, 0.2, 0.3, 0.4, 0.5]})
    rows = between_buckets(psi, summary, {}, published).set_index("left")
    assert rows["right"].tolist() == ["published (arguana, scidocs)"] * 2
    assert rows["systems"].tolist() == [4, 4]
    assert rows.loc["pos Q1", "spearman"] == pytest.approx(1.0)
    assert rows.loc["pos Q2", "spearman"] == pytest.approx(-1.0)
    with pytest.raises(ConfigError, match=r"'position_analysis.published.1': no published"):
        published_ranking(entries, identities, ["arguana", "no-such-set"], "ndcg_cut_10")


def test_the_correlate_job_ranks_each_bucket_against_the_published_ranking(tmp_path, monkeypatch):
    """The correlate job (the rule's script) reads config/reference/published.yaml and the
    systems' identities, and writes each bucket's correlation with the published ranking beside
    the one with its base dataset."""
    monkeypatch.chdir(tmp_path)
    systems = {
        "bm25": BM25_DEFAULTS,
        "minilm": {"family": "dense", "model": "sentence-transformers/all-MiniLM-L6-v2"},
        "bge": {"family": "dense", "model": "BAAI/bge-small-en-v1.5"},
        "e5": {"family": "dense", "model": "intfloat/e5-small-v2"},
    }
    # The base dataset orders them bge < e5 < minilm < bm25; the bucket as published does.
    base = {"bge": 0.1, "e5": 0.2, "minilm": 0.3, "bm25": 0.4}
    bucket = {"bm25": 0.1, "e5": 0.2, "minilm": 0.3, "bge": 0.4}
    summary = pd.DataFrame(
        {"dataset": "sub", "system": list(base), "metric": "ndcg_cut_10", "queries": 10}
    ).assign(value=list(base.values()))
    summary.to_parquet("summary.parquet")
    summary.assign(query_id="q1").to_parquet("per_query.parquet")
    pd.DataFrame({"word": ["cat"], "count": [2]}).to_parquet("unigrams.parquet")
    psi = pd.DataFrame(
        {"dataset": "pos", "bucket": "Q1", "system": list(bucket), "metric": "ndcg_cut_10"}
    ).assign(mean_ndcg=list(bucket.values()))
    psi.to_parquet("psi.parquet")
    settings = {"metric": "ndcg_cut_10", "benchmarks": {}, "bootstrap": None, "reference": None}
    inputs = {"summary": "summary.parquet", "per_query": "per_query.parquet"}
    inputs |= {"unigrams": ["unigrams.parquet"], "reference": [], "psi": ["psi.parquet"]}
    inputs |= {"published": [str(REPO / "config" / "reference" / "published.yaml")]}
    outputs = {"correlations": "correlations.parquet", "bootstrap": "bootstrap.parquet"}
    params = {"settings": settings, "datasets": ["sub"], "buckets": {"pos": ["sub"]}}
    params |= {"published_datasets": ["arguana", "scidocs"], "identities": systems}
    job = {"input": inputs, "output": outputs | {"similarity": "similarity.parquet"}}
    run_scripts({"correlate": job | {"params": params}})
    rows = pd.read_parquet("correlations.parquet")
    rows = rows[rows["kind"] == "buckets"].set_index("right")
    assert rows.index.tolist() == ["sub", "published (arguana, scidocs)"]
    assert rows["systems"].tolist() == [4, 4]
    assert rows.loc["sub", "spearman"] == pytest.approx(-0.8)  # bge and bm25 swap places
    assert rows.loc["published (arguana, scidocs)", "spearman"] == pytest.approx(1.0)


def test_the_correlation_check_reads_the_typed_block():
    """The ``correlation`` check types its block (irflow.core.settings_types.Correlation): a
    block without ``bootstrap`` is the schema's null, no subsampling to check (the dict's
    reading stopped at the missing key); the groups and sides it names are checked as before."""
    from irflow.analyses.correlate import correlation_problems

    config = validated()
    config["correlation"] = {"benchmarks": {"beir": ["d"], "air": ["nope"]}}
    assert correlation_problems(config) == [
        "config key 'correlation.benchmarks.air': 'nope' is not a key of 'datasets'; "
        "allowed values: d"
    ]
    config["correlation"]["bootstrap"] = {"left": "beir", "right": "mteb"}
    assert correlation_problems(config)[1:] == [
        "config key 'correlation.bootstrap.right': 'mteb' is not a key of "
        "'correlation.benchmarks'; allowed values: air, beir"
    ]
