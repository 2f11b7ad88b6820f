"""query_types: PosIR's Table 6 heuristic on written and real queries, and the position analysis
per type (PSI, share and mean score) worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irflow.analyses.query_types import QUERY_TYPES, by_query_type, query_type, query_types_table


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is the role of p53 in apoptosis", "what"),
        ("What’s Driving America’s Obesity Problem?", "what"),  # its first run of letters
        ("How Fruits and Vegetables Can Treat Asthma", "how"),  # leading, no question mark
        ("Why do cats purr?", "why"),
        ("which vitamins are fat soluble", "which"),
        ("When was insulin discovered?", "when"),
        ("where is the thymus", "where"),
        ("Whose theory explains relativity?", "who"),  # the same question word declined
        ("Whom did the court appoint?", "who"),
        ("Do Cholesterol Statin Drugs Cause Breast Cancer?", "others"),  # an auxiliary: yes/no
        ("is coffee bad for you", "others"),  # a form of be, without a question mark
        ("Should We Avoid Titanium Dioxide?", "others"),
        ("In which year was the treaty signed?", "others"),  # the interrogative is not leading
        ("Breast Cancer & Alcohol: How Much is Safe?", "others"),
        ("0-dimensional biomaterials show inductive properties.", "claim"),
        ("Foods for Glaucoma", "claim"),
        ("为什么猫会咕噜？", "others"),  # Chinese: the full-width question mark only
        ("", "claim"),
    ],
)
def test_query_type_follows_table_6_heuristic(text, expected):
    """PosIR: "we adopt a keyword-based heuristic that categorizes queries according to their
    leading interrogative terms (e.g., what), with non-interrogative queries grouped as claim"
    (posir.txt, line 184), OTHERS holding yes/no questions "starting with auxiliary verbs
    (e.g., do/does/did, can, will) or be verbs (e.g., is/are)" (posir.txt, line 184)."""
    assert query_type(text) == expected
    assert expected in QUERY_TYPES


def test_real_queries_fall_into_table_6s_types(shared_datasets):
    """SciFact's test queries are scientific claims, every one of them; NFCorpus's are article
    titles, mostly declarative, some questions (measured: 277 claims, 32 others, 8 how, 5 what
    and 1 who of its 323 judged test queries)."""

    def judged(name):
        folder = shared_datasets / name
        queries = pd.read_json(folder / "queries.jsonl", lines=True, dtype={"_id": str})
        qrels = pd.read_csv(folder / "qrels" / "test.tsv", sep="\t", dtype=str)
        return queries[queries["_id"].isin(qrels["query-id"])]["text"].map(query_type)

    assert judged("scifact").value_counts().to_dict() == {"claim": 300}
    counts = judged("nfcorpus").value_counts().to_dict()
    assert counts == {"claim": 277, "others": 32, "how": 8, "what": 5, "who": 1}


def rows(queries: list[tuple]) -> pd.DataFrame:
    """analyse's rows with a query type: (query_id, text, relpos, value) of one system."""
    frame = pd.DataFrame(queries, columns=["query_id", "text", "relpos", "value"])
    return frame.assign(
        dataset="d",
        system="s",
        metric="ndcg_cut_10",
        doc_tokens=np.where(frame["relpos"].isna(), np.nan, 100),
        query_type=frame.pop("text").map(query_type),
    )


def test_each_type_gets_its_share_mean_score_and_psi():
    table = by_query_type(
        rows(
            [
                ("q1", "What is X?", 0.0, 1.0),
                ("q2", "what causes Y", 1.0, 0.5),
                ("q3", "How does Z work", 0.0, 0.8),
                ("q4", "how to cook rice", 1.0, 0.8),
                ("q5", "Vitamin D lowers flu risk", np.nan, 0.3),  # no span places it
                ("q6", "Is coffee safe?", 0.5, 0.2),
            ]
        )
    )
    overall = table[table["bucket"] == "all"].set_index("query_type")
    # Table 6's order; a claim has no placed query, so its pooled row only.
    assert overall.index.tolist() == ["what", "how", "claim", "others"]
    assert table["query_type"].tolist() == ["what"] * 2 + ["how"] * 2 + ["claim"] + ["others"] * 2
    assert overall["scored_queries"].tolist() == [2, 2, 1, 1]
    assert overall["share"].tolist() == pytest.approx([2 / 6, 2 / 6, 1 / 6, 1 / 6])
    # Mean score over the type's queries; PSI = 1 - min/max of its bins: 1 - 0.5/1.0, 1 - 0.8/0.8.
    assert overall["mean_ndcg"].tolist() == pytest.approx([0.75, 0.8, 0.3, 0.2])
    assert overall.loc["what", "psi"] == pytest.approx(0.5)
    assert overall.loc["what", "trend"] == "primacy"
    assert overall.loc["how", "psi"] == 0.0 and overall.loc["how", "trend"] == "flat"
    assert np.isnan(overall.loc["claim", "psi"]) and np.isnan(overall.loc["others", "psi"])
    assert overall.loc["claim", "reason"] == "no query of this type has a placed span"
    assert overall.loc["others", "reason"] == "usable bins: 1; PSI and the trend need 2"
    html = query_types_table(table)
    assert html.count("</tr>") == 5  # the header and each type's pooled row
    assert "no query of this type has a placed span" in html
