"""cost: latencies add up query by query along each system's stages."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from irflow.core.records import parse
from irflow.core.timing import time_each
from irflow.evaluation.cost import CostModel, in_sequence
from irflow.workflow.families import family

CONFIG = {
    "models": {"m": {"id": "m", "long_documents": {"strategy": "truncate"}}},
    "indexes": {
        "flat": {"type": "flat", "shard_rows": None},
        "ivf": {"type": "ivf", "shard_rows": None},
        "shards": {"type": "flat", "shard_rows": 1024},
    },
    "retrievers": {
        "bm25": {"type": "bm25"},
        "dense": {"type": "dense", "model": "m", "index": "flat"},
    },
    "fusion": {"rrf": {"method": "rrf", "runs": ["bm25", "dense"]}},
}
KINDS = {"bm25": "bm25", "dense": "dense", "rrf": "fusion", "bm25+ce@10": "rerank"}
MANIFESTS = {
    ("retrieve", "d", "bm25"): {"latency": {"q1": 0.001, "q2": 0.003}},
    ("index_bm25", "d", "bm25"): {"index_bytes": 100, "index_seconds": 2.0},
    ("retrieve", "d", "dense"): {"latency": {"q1": 0.002, "q2": 0.002}},
    ("embed", "d", "m", "queries"): {"latency": {"q1": 0.010, "q2": 0.020}},
    ("embed", "d", "m", "corpus"): {
        "rows": 1000,
        "encode_seconds": 4.0,
        "device": "cpu",
        "similarity": "cosine",
    },
    ("index", "d", "m", "flat"): {"index_bytes": 1536000, "index_seconds": 0.5},
    ("rerank", "d", "bm25+ce@10"): {
        "first_stage": "bm25",
        "latency": {"q1": 0.1, "q2": 0.2},
        "device": "cpu",
    },
}


def recorded(manifests: dict):
    """The cost table's reader of ``manifests`` (by folder and names): their typed records, of
    the stage of the folder unless they name theirs."""
    return lambda stage, *names: parse({"stage": stage} | manifests[(stage, *names)])


@pytest.fixture
def model():
    return CostModel(CONFIG, KINDS, recorded(MANIFESTS), family)


def test_stages_add_up_per_query(model):
    assert model.latency("d", "dense") == pytest.approx({"q1": 0.012, "q2": 0.022})
    assert model.latency("d", "rrf") == pytest.approx({"q1": 0.013, "q2": 0.025})
    assert model.latency("d", "bm25+ce@10") == pytest.approx({"q1": 0.101, "q2": 0.203})


def test_a_fusions_entry_is_read_typed():
    """A fusion's latency adds up its runs', read from its typed entry
    (irflow.core.settings_types.Fusion): an entry the schema refuses (its runs misspelt) is
    refused, naming the key."""
    config = CONFIG | {"fusion": {"rrf": {"method": "rrf", "run": ["bm25", "dense"]}}}
    with pytest.raises(ValidationError, match="runs"):
        CostModel(config, KINDS, recorded(MANIFESTS), family).latency("d", "rrf")


def test_cost_table(model):
    table = model.table(["d"]).set_index("system")
    assert table.loc["dense", "encode_docs_per_second"] == 250.0
    assert table.loc["dense", "index_bytes"] == 1536000
    assert table.loc["bm25", "index_build_seconds"] == 2.0
    assert table.loc["bm25", "latency_median_ms"] == pytest.approx(2.0)
    assert table.loc["bm25+ce@10", "latency_p95_ms"] == pytest.approx(101 + 0.95 * 102)
    assert (table["latency_queries"] == 2).all()


def test_in_sequence_keeps_queries_measured_everywhere():
    assert in_sequence({"a": 1.0, "b": 2.0}, {"b": 3.0, "c": 4.0}) == {"b": 5.0}


def test_time_each_times_every_item():
    seconds = time_each(lambda n: sum(range(n)), [10, 100_000])
    assert len(seconds) == 2 and seconds[1] > seconds[0] > 0


def test_no_recorded_encode_seconds_gives_no_throughput_rather_than_an_error():
    # A manifest written before parts recorded their seconds, by a job that resumed them all.
    manifests = MANIFESTS | {
        ("embed", "d", "m", "corpus"): {"rows": 1000, "encode_seconds": 0.0, "device": "cpu"}
    }
    model = CostModel(CONFIG, KINDS, recorded(manifests), family)
    table = model.table(["d"]).set_index("system")
    assert math.isnan(table.loc["dense", "encode_docs_per_second"])
    assert table.loc["dense", "index_bytes"] == 1536000


def test_a_flat_index_searched_in_shards_has_no_index_to_count():
    config = CONFIG | {
        "retrievers": CONFIG["retrievers"]
        | {"sharded": {"type": "dense", "model": "m", "index": "shards"}}
    }
    kinds = KINDS | {"sharded": "dense"}
    # No index job wrote a manifest for it: none is read.
    manifests = MANIFESTS | {("retrieve", "d", "sharded"): {"latency": {"q1": 0.002}}}
    model = CostModel(config, kinds, recorded(manifests), family)
    table = model.table(["d"]).set_index("system")
    assert table.loc["sharded", ["index_bytes", "index_build_seconds"]].tolist() == [0, 0.0]
    assert table.loc["sharded", "encode_docs_per_second"] == 250.0


def test_approximate_indexes_carry_their_recall_against_exact_search():
    config = CONFIG | {
        "retrievers": CONFIG["retrievers"]
        | {
            "ivf": {"type": "dense", "model": "m", "index": "ivf"},
            "colbert": {"type": "late-interaction", "model": "c"},
        }
    }
    kinds = KINDS | {"ivf": "dense", "colbert": "late-interaction"}
    recall = {"queries": 100, "seed": 0, "top_k": 1000, "recall": 0.97, "settings": {}}
    manifests = MANIFESTS | {
        ("retrieve", "d", "dense"): {"latency": {"q1": 0.002}, "recall": None},  # flat: exact
        ("retrieve", "d", "ivf"): {"latency": {"q1": 0.001}, "recall": recall},
        ("index", "d", "m", "ivf"): {"index_bytes": 1000, "index_seconds": 0.1},
        ("retrieve", "d", "colbert"): {
            "latency": {"q1": 0.003},
            "index_bytes": 10,
            "index_seconds": 1.0,
            "recall": recall | {"queries": 20, "recall": 0.9},
        },
        # Filed under results/manifests/tokens/, the stage of encode_vectors' jobs.
        ("tokens", "d", "c", "corpus"): {
            "stage": "encode_vectors",
            "rows": 10,
            "encode_seconds": 1,
            "device": "cpu",
        },
        ("tokens", "d", "c", "queries"): {"stage": "encode_vectors", "latency": {"q1": 0.01}},
    }
    model = CostModel(config, kinds, recorded(manifests), family)
    table = model.table(["d"]).set_index("system")
    assert table.loc["ivf", ["recall_against_exact", "recall_queries"]].tolist() == [0.97, 100]
    assert table.loc["colbert", ["recall_against_exact", "recall_queries"]].tolist() == [0.9, 20]
    assert table.loc[["dense", "bm25"], "recall_against_exact"].isna().all()
