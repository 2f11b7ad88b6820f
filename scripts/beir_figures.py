"""Snakemake script for rule beir_figures: see irflow.analyses.beir_figures."""

from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.analyses import beir_figures
from irflow.core import contracts

setup_logging(snakemake)
settings, output = snakemake.params.settings, snakemake.output
baseline, metric, depth = settings["baseline"], settings["metric"], settings["depth"]
summary = contracts.read_frame(snakemake.input.summary)
layout = snakemake.params.layout
versus = beir_figures.versus_baseline(summary, layout, metric, baseline)
wins = beir_figures.wins(versus)
runs = iter(snakemake.input.runs)
hits = []
for dataset, corpus in zip(snakemake.params.datasets, snakemake.input.corpora):
    lengths = beir_figures.word_lengths(contracts.read_frame(corpus))
    for system in snakemake.params.systems:
        run = contracts.read_frame(next(runs))
        top = beir_figures.top_lengths(run, lengths, depth)
        hits.append(top.assign(dataset=dataset, system=system))
hits = pd.concat(hits, ignore_index=True)[
    ["dataset", "system", "query_id", "rank", "doc_id", "words"]
]
lengths = beir_figures.length_summary(hits)
for name, frame in (("versus", versus), ("wins", wins), ("hits", hits), ("lengths", lengths)):
    contracts.write_frame(frame, output[name])
Path(output.markdown).write_text(beir_figures.markdown(wins, lengths, baseline, metric))
beir_figures.plot_wins(wins, baseline, metric, Path(output.wins_plot))
beir_figures.plot_lengths(hits, depth, Path(output.lengths_plot))
