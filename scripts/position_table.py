"""The position table of docs/validation.md: python scripts/position_table.py [results].

Per positionalize block, length and system: nDCG@10 of each variant (the same queries at every
position), 1 − min/max over those variants (irflow's controlled comparison), and PosIR's PSI of
the length's bucket with its bootstrap interval and trend (results/psi.parquet); then the
overall PSI, the buckets pooled.
"""

import sys
from pathlib import Path

from irflow.analyses.position import OVERALL, length_bucket
from irflow.core import contracts
from irflow.derived.positionalize import parse_variant

results = Path(sys.argv[1] if len(sys.argv) > 1 else "results")
psi = contracts.read_frame(results / "psi.parquet")
metric = psi["metric"].iloc[0]
summary = contracts.read_frame(results / "summary.parquet")
summary = summary[(summary["metric"] == metric) & summary["dataset"].str.contains("@L")]
parsed = summary["dataset"].map(parse_variant)
summary = summary.assign(
    block=parsed.str[0], length=parsed.str[1], position=parsed.str[2]
).pivot_table(index=["block", "length", "system"], columns="position", values="value")
positions = list(summary.columns)
print(
    "| length | system | "
    + " | ".join(f"{p:g}" for p in positions)
    + " | 1 − min/max | PSI (PosIR) | 95% interval | trend |"
)
print("| --- | --- | " + "---: | " * (len(positions) + 3) + "--- |")
by_bucket = psi.set_index(["dataset", "bucket", "system"])
for (block, length, system), scores in summary.iterrows():
    bucket = str(length_bucket([length])[0])
    row = by_bucket.loc[(block, bucket, system)]
    cells = [f"{value:.4f}" for value in scores]
    cells.append(f"{1 - scores.min() / scores.max():.3f}")
    cells += [f"{row['psi']:.3f}", f"{row['psi_low']:.3f}–{row['psi_high']:.3f}", row["trend"]]
    print(f"| {length} | {system} | " + " | ".join(cells) + " |")
print()
for (block, system), row in (
    psi[psi["bucket"] == OVERALL].set_index(["dataset", "system"]).iterrows()
):
    print(
        f"{block} {system}: overall PSI {row['psi']:.3f} ({row['psi_low']:.3f}–"
        f"{row['psi_high']:.3f}), nDCG@10 over every query {row['mean_ndcg']:.4f}"
    )
