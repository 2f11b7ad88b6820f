"""PosIR's position analysis: relative positions, buckets, bins, PSI and the trend."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from test_positionalize import word_tokenizer

from irflow.analyses.position import (
    analyse,
    length_bucket,
    position_bin,
    relative_position,
    span_positions,
)


def rows(cells: list[tuple[str, float, float]], tokens: int = 100) -> pd.DataFrame:
    """(bucket-free) scored queries: (query_id, relpos, value), all of one length."""
    return pd.DataFrame(
        {
            "dataset": "d",
            "system": "s",
            "metric": "ndcg_cut_10",
            "query_id": [c[0] for c in cells],
            "relpos": [c[1] for c in cells],
            "value": [c[2] for c in cells],
            "doc_tokens": tokens,
        }
    )


def test_relative_position_of_span_centres():
    starts, ends, chars = [0, 90, 100, 40, 0], [10, 100, 100, 60, 0], [100, 100, 100, 100, 0]
    assert np.allclose(relative_position(starts, ends, chars)[:4], [0.05, 0.95, 1.0, 0.5])
    assert np.isnan(relative_position(starts, ends, chars)[4])  # an empty document
    assert relative_position([0], [400], [100])[0] == 1.0  # clipped, as PosIR


def test_position_bins_are_closed_on_the_right():
    assert position_bin([0, 0.05, 0.0500001, 0.5, 0.999, 1.0]).tolist() == [0, 0, 1, 9, 19, 19]
    assert position_bin([0, 0.5, 1.0], bins=2).tolist() == [0, 0, 1]
    assert np.isnan(position_bin([1.5])[0])


def test_length_buckets_as_posir():
    tokens = [1, 512, 513, 1024, 1536, 1537, 100_000]
    assert list(length_bucket(tokens)) == ["Q1", "Q1", "Q2", "Q2", "Q3", "Q4", "Q4"]
    assert list(length_bucket([100, 101, 250], bucket_tokens=100, buckets=2)) == ["Q1", "Q2", "Q2"]


def test_psi_and_primacy_on_known_values():
    # Bin 0 holds 0.8 on average, bin 19 holds 0.4: PSI = 1 - 0.4 / 0.8.
    cells = [("a", 0.0, 0.7), ("b", 0.01, 0.9), ("c", 1.0, 0.4), ("d", 0.97, 0.4)]
    bins, psi = analyse(rows(cells), min_count=1)
    row = psi.iloc[0]
    assert row["psi"] == pytest.approx(0.5)
    assert row["trend"] == "primacy"
    assert row["slope"] == pytest.approx((0.4 - 0.8) / 0.95)  # between centres .025 and .975
    assert (row["bins_used"], row["bins_excluded"], row["queries"]) == (2, 0, 4)
    assert row["mean_ndcg"] == pytest.approx(0.6)  # over the bucket's 4 queries
    assert pd.isna(row["reason"])
    used = bins[bins["queries"] > 0]
    assert used["bin"].tolist() == [0, 19]
    assert used["mean_ndcg"].tolist() == pytest.approx([0.8, 0.4])
    assert used["bin_start"].tolist() == pytest.approx([0, 0.95])
    assert used["bin_end"].tolist() == pytest.approx([0.05, 1.0])


def test_empty_bins_are_listed_but_not_used():
    bins, psi = analyse(rows([("a", 0.0, 0.5), ("b", 1.0, 0.5)]), min_count=1)
    assert len(bins) == 20
    empty = bins[bins["queries"] == 0]
    assert len(empty) == 18 and empty["mean_ndcg"].isna().all() and not empty["excluded"].any()
    assert psi.iloc[0]["psi"] == 0 and psi.iloc[0]["trend"] == "flat"


def test_bins_under_min_count_are_excluded_and_reported():
    cells = [(f"a{i}", 0.0, 0.6) for i in range(3)] + [(f"b{i}", 0.5, 0.3) for i in range(3)]
    cells.append(("c", 1.0, 0.0))  # one query at the end: too few to count
    bins, psi = analyse(rows(cells), min_count=2)
    assert bins.loc[bins["excluded"], "bin"].tolist() == [19]
    row = psi.iloc[0]
    assert (row["bins_used"], row["bins_excluded"], row["queries"]) == (2, 1, 7)
    assert row["psi"] == pytest.approx(0.5)  # the excluded 0.0 does not make it 1


def test_a_bucket_with_one_usable_bin_has_no_psi():
    cells = [("a", 0.46, 0.7), ("b", 0.48, 0.3), ("c", 0.9, 1.0)]
    _, psi = analyse(rows(cells), min_count=2)
    row = psi.iloc[0]
    assert np.isnan(row["psi"]) and np.isnan(row["slope"]) and pd.isna(row["trend"])
    assert row["bins_used"] == 1 and row["bins_excluded"] == 1
    assert row["reason"] == "usable bins: 1; PSI and the trend need 2"


def test_psi_columns_keep_their_types_in_parquet(tmp_path):
    from irflow.core import contracts

    _, psi = analyse(rows([("a", 0.0, 0.5), ("b", 1.0, 0.4)]), min_count=1)
    contracts.write_frame(psi, tmp_path / "psi.parquet")
    schema = pd.read_parquet(tmp_path / "psi.parquet").dtypes
    assert str(schema["reason"]) == "string" and str(schema["trend"]) == "string"


def test_all_zero_scores_have_no_psi():
    _, psi = analyse(rows([("a", 0.0, 0.0), ("b", 1.0, 0.0)]), min_count=1)
    assert np.isnan(psi.iloc[0]["psi"]) and psi.iloc[0]["trend"] == "flat"
    assert psi.iloc[0]["reason"] == "every usable bin scores 0"


def test_trend_calls_recency_and_flat_by_slope_size():
    rising = [(f"q{i}", i / 4, 0.4 + 0.1 * i) for i in range(5)]
    assert analyse(rows(rising), min_count=1)[1].iloc[0]["trend"] == "recency"
    # A change of 5% of the mean from start to end is within the default 10%.
    gentle = [(f"q{i}", i / 4, 0.5 + 0.00625 * i) for i in range(5)]
    _, psi = analyse(rows(gentle), min_count=1)
    assert psi.iloc[0]["slope"] > 0 and psi.iloc[0]["trend"] == "flat"
    _, psi = analyse(rows(gentle), min_count=1, flat_below=0.01)
    assert psi.iloc[0]["trend"] == "recency"


def test_buckets_and_systems_are_separate():
    short = rows([("a", 0.0, 1.0), ("b", 1.0, 0.5)], tokens=512)
    long = rows([("a", 0.0, 0.2), ("b", 1.0, 0.8)], tokens=2048)
    other = short.assign(system="t", value=[0.5, 0.5])
    _, psi = analyse(pd.concat([short, long, other]), min_count=1)
    calls = {(r.system, r.bucket): (r.psi, r.trend) for r in psi.itertuples()}
    assert calls == {
        ("s", "Q1"): (pytest.approx(0.5), "primacy"),
        ("s", "Q4"): (pytest.approx(0.75), "recency"),
        ("t", "Q1"): (0.0, "flat"),
        # Both buckets pooled (PosIR's overall PSI): bin 0 holds 1.0 and 0.2, bin 19 0.5 and
        # 0.8, so 1 - 0.6 / 0.65; a fitted change of 0.05 is within 10% of the mean 0.625.
        ("s", "all"): (pytest.approx(1 - 0.6 / 0.65), "flat"),
        ("t", "all"): (0.0, "flat"),
    }


def test_span_positions_from_qrels_and_documents():
    documents = pd.DataFrame(
        {"doc_id": ["h1", "h2", "h3"], "text": ["a b c d e f g h i j", "x y", "p q"]}
    )
    qrels = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q2", "q3"],
            "doc_id": ["h1", "h2", "h2", "h3", "h3"],
            "relevance": [1, 0, 1, 1, 1],
            "span_start": pd.array([16, None, 0, 0, None], dtype="Int64"),
            "span_end": pd.array([19, None, 1, 1, None], dtype="Int64"),
        }
    )
    # q2 has two relevant documents and q3 no span: neither can be placed.
    positions = span_positions(qrels, documents, word_tokenizer())
    assert positions["query_id"].tolist() == ["q1"]
    assert positions["relpos"].tolist() == pytest.approx([17.5 / 19])
    assert positions["doc_tokens"].tolist() == [10]


def test_span_positions_take_the_collections_token_lengths_where_given():
    documents = pd.DataFrame({"doc_id": ["h1", "h2"], "text": ["a b c d e f g h i j", "x y"]})
    qrels = pd.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "doc_id": ["h1", "h2"],
            "relevance": [1, 1],
            "span_start": pd.array([0, 0], dtype="Int64"),
            "span_end": pd.array([1, 1], dtype="Int64"),
            "doc_tokens": pd.array([700, None], dtype="Int64"),  # PosIR's pos_token_length
        }
    )
    positions = span_positions(qrels, documents, word_tokenizer())
    # h1's stated 700 tokens (not the 10 its text has); h2 has none stated: counted, 2.
    assert positions["doc_tokens"].tolist() == [700, 2]


def test_translated_documents_are_placed_by_the_collections_length(tmp_path, caplog):
    """PosIR's ndcg_PSI_analysis.py places a query by its own ``pos_char_length``, not by the
    text it retrieves: "position": float(sum(v["pos_char_span"])/2), "total_length":
    v["pos_char_length"], then position / total_length. A translation's text is longer or
    shorter than the length its span was counted on."""
    import logging

    from test_ingest import POSIR_QRELS, POSIR_QUERIES, ingest_posir, write_posir

    translated = [
        {"_id": "d1", "text": "Les chats ronronnent et dorment au soleil, longuement."},  # 54
        {"_id": "d2", "text": "Chiens aboient."},  # 15 characters
    ]
    folder = write_posir(
        tmp_path / "fra",
        corpus=translated,
        queries=[
            POSIR_QUERIES[0] | {"pos_char_span": [10, 20]},  # pos_char_length 31
            POSIR_QUERIES[1] | {"pos_char_span": [14, 22]},  # 25: past the 15-character text
        ],
        qrels=POSIR_QRELS[:2],
    )
    stats = ingest_posir(folder, tmp_path / "out")
    # Both lengths disagree with the texts (counted in the ingest manifest); nothing is clipped.
    assert stats["spans"]["length_mismatches"] == 2 and stats["spans"]["clipped"] == 0
    qrels = pd.read_parquet(tmp_path / "out" / "qrels.parquet")
    assert qrels.loc[qrels["relevance"] > 0, "doc_chars"].tolist() == [31, 25]
    corpus = pd.read_parquet(tmp_path / "out" / "corpus.parquet")
    with caplog.at_level(logging.WARNING, logger="irflow.analyses.position"):
        positions = span_positions(qrels, corpus, word_tokenizer())
    assert positions["relpos"].tolist() == pytest.approx([15 / 31, 18 / 25])
    assert "2 of 2 placed queries" in caplog.text


def test_overall_score_is_posirs_mean_over_every_query():
    """PosIR's overall nDCG@10 (Table 2) is ndcg_PSI_analysis.py's "nDCG@10":
    float(np.mean([s["score"] for s in all_items])), every evaluated query, taken before the
    queries without a located span are dropped for binning."""
    placed = rows([(f"a{i}", 0.0, 1.0) for i in range(3)] + [("b", 1.0, 0.2)])
    # No located span, or several relevant documents: scored, but in no bin.
    unplaced = rows([("c", np.nan, 0.0), ("d", np.nan, 0.1)])
    bins, psi = analyse(pd.concat([placed, unplaced]))
    by_bucket = psi.set_index("bucket")
    assert by_bucket.loc["all", "mean_ndcg"] == pytest.approx((3 + 0.2 + 0.0 + 0.1) / 6)
    assert by_bucket.loc["Q1", "mean_ndcg"] == pytest.approx((1.0 + 0.2) / 2)  # bins' mean
    assert by_bucket.loc["all", "mean_ndcg_queries"] == pytest.approx(3.2 / 4)
    assert by_bucket.loc["all", "queries"] == 4 and bins["queries"].sum() == 4
    assert by_bucket.loc["all", "psi"] == pytest.approx(0.8)


def test_bucket_score_is_the_plain_mean_of_bin_means():
    # The example: 9 queries at the start scoring 1.0, one at the end scoring 0.2.
    cells = [(f"a{i}", 0.0, 1.0) for i in range(9)] + [("b", 1.0, 0.2)]
    _, psi = analyse(rows(cells))
    bucket = psi.set_index("bucket").loc["Q1"]
    assert bucket["mean_ndcg"] == pytest.approx(0.6)  # PosIR: (1.0 + 0.2) / 2
    assert bucket["mean_ndcg_queries"] == pytest.approx(0.92)  # (9 + 0.2) / 10
    # Three unequal bins: 1.0 (4 queries), 0.5 (1), 0.0 (2).
    cells = [(f"a{i}", 0.0, 1.0) for i in range(4)] + [("b", 0.5, 0.5)]
    cells += [("c", 1.0, 0.0), ("d", 0.98, 0.0)]
    _, psi = analyse(rows(cells))
    assert psi.iloc[0]["mean_ndcg"] == pytest.approx(0.5)
    assert psi.iloc[0]["mean_ndcg_queries"] == pytest.approx(4.5 / 7)


def test_min_count_defaults_to_every_non_empty_bin_as_posir():
    cells = [("a", 0.0, 1.0), ("b", 1.0, 0.2)]
    _, psi = analyse(rows(cells))
    row = psi.iloc[0]
    assert row["psi"] == pytest.approx(0.8) and row["psi_every_bin"] == pytest.approx(0.8)
    assert (row["bins_used"], row["bins_excluded"]) == (2, 0)


def test_a_min_count_reports_posirs_psi_beside_its_own(caplog):
    cells = [(f"a{i}", 0.0, 0.6) for i in range(3)] + [(f"b{i}", 0.5, 0.3) for i in range(3)]
    cells.append(("c", 1.0, 0.15))
    _, psi = analyse(rows(cells), min_count=2)
    row = psi.set_index("bucket").loc["Q1"]
    assert row["psi"] == pytest.approx(0.5)
    assert row["psi_every_bin"] == pytest.approx(0.75)
    # The bucket's score is PosIR's whatever min_count: the mean of the non-empty bins.
    assert row["mean_ndcg"] == pytest.approx((0.6 + 0.3 + 0.15) / 3)
    assert "0.5000; 0.7500 over every non-empty bin" in caplog.text


def test_overall_psi_pools_the_buckets():
    short = rows([("a", 0.0, 0.9), ("b", 0.5, 0.6)], tokens=100)
    long = rows([("c", 0.0, 0.5), ("d", 0.5, 0.2), ("e", 0.5, 0.2)], tokens=3000)
    bins, psi = analyse(pd.concat([short, long]))
    overall = psi.set_index("bucket").loc["all"]
    # Bin 0: 0.9 and 0.5; bin 9: 0.6, 0.2 and 0.2.
    assert overall["psi"] == pytest.approx(1 - (1.0 / 3) / 0.7)
    # The overall score is PosIR's mean over every query, not the mean of the bins' means.
    assert overall["mean_ndcg"] == pytest.approx(2.4 / 5)
    assert overall["mean_ndcg_queries"] == pytest.approx(2.4 / 5)
    assert overall["queries"] == 5
    assert set(bins["bucket"]) == {"Q1", "Q4"}  # the pooled bins are not a bucket of their own


INTERVAL = {"resamples": 500, "confidence": 0.9, "seed": 1}


def test_psi_interval_is_a_seeded_bootstrap_around_psi():
    rng = np.random.default_rng(0)
    cells = [(f"s{i}", 0.0, v) for i, v in enumerate(rng.uniform(0.5, 1.0, 30))]
    cells += [(f"e{i}", 1.0, v) for i, v in enumerate(rng.uniform(0.0, 0.5, 30))]
    _, psi = analyse(rows(cells), interval=INTERVAL)
    row = psi.iloc[0]
    assert 0 < row["psi_low"] < row["psi"] < row["psi_high"] < 1
    _, again = analyse(rows(cells), interval=INTERVAL)
    assert (again.iloc[0]["psi_low"], again.iloc[0]["psi_high"]) == (
        row["psi_low"],
        row["psi_high"],
    )
    # Ten times the queries with the same spread: a narrower interval.
    many = [(f"{q}{k}", pos, value) for k in range(10) for q, pos, value in cells]
    _, narrow = analyse(rows(many), interval=INTERVAL)
    width = row["psi_high"] - row["psi_low"]
    assert narrow.iloc[0]["psi_high"] - narrow.iloc[0]["psi_low"] < width / 2
    # No interval unless asked for, and none where there is no PSI.
    assert np.isnan(analyse(rows(cells))[1].iloc[0]["psi_low"])
    _, single = analyse(rows([("a", 0.0, 0.5)]), interval=INTERVAL)
    assert np.isnan(single.iloc[0]["psi_low"]) and np.isnan(single.iloc[0]["psi_high"])


def test_the_bootstrap_block_is_typed_with_the_schemas_defaults():
    """analyse types the ``position_analysis.bootstrap`` block once
    (irflow.core.settings_types.Bootstrap1): one that names only its resamples takes the
    schema's confidence 0.95 and seed 0 (the dict's reading stopped at the missing key), and
    a key the schema lacks is refused, naming it."""
    rng = np.random.default_rng(0)
    cells = [(f"s{i}", 0.0, v) for i, v in enumerate(rng.uniform(0.5, 1.0, 20))]
    cells += [(f"e{i}", 1.0, v) for i, v in enumerate(rng.uniform(0.0, 0.5, 20))]
    _, named = analyse(rows(cells), interval={"resamples": 200})
    _, whole = analyse(rows(cells), interval={"resamples": 200, "confidence": 0.95, "seed": 0})
    interval = ["psi_low", "psi_high"]
    assert named[interval].equals(whole[interval])
    assert 0 < named.iloc[0]["psi_low"] < named.iloc[0]["psi"] < named.iloc[0]["psi_high"]
    with pytest.raises(ValidationError, match="confidence_level"):
        analyse(rows(cells), interval={"resamples": 200, "confidence_level": 0.9})


def test_psi_interval_resamples_queries_not_rows():
    # Every query sits at both ends with one score: any draw of queries gives equal bin
    # means and PSI 0; a draw of rows would not.
    values = np.linspace(0.1, 1.0, 20)
    cells = [(f"q{i}", pos, v) for i, v in enumerate(values) for pos in (0.0, 1.0)]
    _, psi = analyse(rows(cells), interval=INTERVAL)
    row = psi.iloc[0]
    assert row["psi"] == pytest.approx(0) and row["psi_high"] == pytest.approx(0)


def test_a_languages_domain_datasets_are_pooled_before_binning():
    from conftest import SCHEMA

    from irflow.analyses.position import pooled_group
    from irflow.core.errors import ConfigError
    from irflow.core.settings_types import PositionAnalysis
    from irflow.workflow.config import validate_config

    source = {"source": {"type": "url", "url": "https://example.org/d.zip"}}
    config = {
        "datasets": {"eng-law": source, "eng-med": source, "deu-law": source},
        "retrievers": {"bm25": {"type": "bm25"}},
        "position_analysis": {
            "tokenizer": "bert-base-uncased",
            "datasets": ["eng-law", "eng-med", "deu-law"],
            "pool": {"eng": ["eng-law", "eng-med"]},
        },
    }
    analysis = PositionAnalysis.model_validate(validate_config(config, SCHEMA)["position_analysis"])
    groups = [pooled_group(d, analysis) for d in ("eng-law", "eng-med", "deu-law")]
    assert groups == ["eng", "eng", None]
    config["position_analysis"]["pool"] = {"eng": ["eng-law", "fra-law"], "all": ["eng-law"]}
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    assert "'position_analysis.pool.eng.1': 'fra-law' is not a key" in str(error.value)
    assert "'position_analysis.pool.all.0': 'eng-law' is already in another pool" in str(
        error.value
    )
    # Pooled rows are one dataset to the analysis: bins mix the domains' queries.
    law = rows([("a", 0.0, 1.0)]).assign(dataset="eng")
    med = rows([("b", 0.0, 0.5), ("c", 1.0, 0.25)]).assign(dataset="eng")
    _, psi = analyse(pd.concat([law, med]))
    assert psi.set_index("bucket").loc["Q1", "psi"] == pytest.approx(1 - 0.25 / 0.75)
