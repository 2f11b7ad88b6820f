"""Snakemake script for rule correlate: see irflow.analyses.correlate."""

from collections import Counter

import pandas as pd
from _common import setup_logging

from irflow.analyses.correlate import (
    BOOTSTRAP_COLUMNS,
    against_reference,
    between_benchmarks,
    between_buckets,
    between_datasets,
    between_metrics,
    bootstrap_correlation,
    corpus_similarity,
    load_reference,
    published_ranking,
)
from irflow.core import contracts
from irflow.evaluation.published import load_published, reference_scores

setup_logging(snakemake)
settings, inp, out = snakemake.params.settings, snakemake.input, snakemake.output
everything = contracts.read_frame(inp.summary)
# Position-controlled variants are compared by length bucket below, not as datasets.
summary = everything[everything["dataset"].isin(snakemake.params.datasets)]
per_query = contracts.read_frame(inp.per_query)
metric = settings["metric"]

tables = [between_datasets(summary, metric).assign(kind="datasets", metric=metric)]
tables.append(between_metrics(summary).assign(kind="metrics", metric="(all)"))
if settings["benchmarks"]:
    tables.append(
        between_benchmarks(summary, settings["benchmarks"], metric).assign(
            kind="benchmarks", metric=metric
        )
    )
if inp.reference:
    scores = (
        reference_scores(contracts.read_frame(inp.reference[0]), metric)
        if settings["reference"] == "published"
        else load_reference(inp.reference[0])
    )
    reference = against_reference(summary, scores, metric)
    tables.append(
        reference.rename(columns={"benchmark": "right"}).assign(
            left="irflow", kind="reference", metric=metric
        )
    )
if inp.psi:
    psi = contracts.read_frame(inp.psi[0])
    # PosIR's outside ranking (its MMTEB): the systems' published scores of the buckets' metric.
    published = (
        published_ranking(
            load_published(inp.published[0]),
            snakemake.params.identities,
            snakemake.params.published_datasets,
            psi["metric"].iloc[0],
        )
        if inp.published and not psi.empty
        else None
    )
    buckets = between_buckets(psi, everything, snakemake.params.buckets, published)
    tables.append(buckets.assign(kind="buckets"))
correlations = pd.concat(tables, ignore_index=True)
contracts.write_frame(correlations, out.correlations, contracts.CORRELATIONS)

draws = pd.DataFrame(columns=[*BOOTSTRAP_COLUMNS, "left", "right"])
if settings["bootstrap"] is not None:
    boot = settings["bootstrap"]
    draws = bootstrap_correlation(
        per_query,
        metric,
        settings["benchmarks"][boot["left"]],
        settings["benchmarks"][boot["right"]],
        resamples=boot["resamples"],
        sample_size=boot["sample_size"],
        seed=boot["seed"],
    ).assign(left=boot["left"], right=boot["right"])
contracts.write_frame(draws, out.bootstrap, contracts.BOOTSTRAP)

counts = {
    dataset: Counter(dict(zip(*contracts.read_table(path).to_pydict().values())))
    for dataset, path in zip(snakemake.params.datasets, inp.unigrams)
}
similarity = corpus_similarity(counts).rename_axis(index="left", columns="right")
long = similarity.stack().rename("similarity").reset_index()
contracts.write_frame(long, out.similarity)
