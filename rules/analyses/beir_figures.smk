# beir_figures: BEIR's Figure 3 (per system, on how many of the benchmark's datasets it beats
# the baseline, and by how much) and Figure 4 (the lengths in words of each system's top
# documents) for the config's systems, when beir_figures.baseline names one. See
# irflow.analyses.beir_figures.

BEIR_FIGURES = config["beir_figures"]
# The benchmark's own datasets (a derived dataset is not one of BEIR's).
BEIR_FIGURES_DATASETS = plan.base_datasets if BEIR_FIGURES["baseline"] else []


rule beir_figures:
    input:
        summary="results/summary.parquet",
        runs=[
            f"results/runs/{d}/{s}.parquet"
            for d in BEIR_FIGURES_DATASETS
            for s in plan.systems
        ],
        corpora=[
            f"results/datasets/{d}/filtered/corpus.parquet"
            for d in BEIR_FIGURES_DATASETS
        ],
    output:
        versus="results/beir_figures/versus_baseline.parquet",
        wins="results/beir_figures/wins.parquet",
        hits="results/beir_figures/top_hits.parquet",
        lengths="results/beir_figures/top_lengths.parquet",
        markdown="results/beir_figures/beir_figures.md",
        wins_plot=report(
            "results/plots/beir_wins.png",
            caption="../../report/beir_figures.rst",
            category="BEIR's figures",
        ),
        lengths_plot=report(
            "results/plots/beir_lengths.png",
            caption="../../report/beir_figures.rst",
            category="BEIR's figures",
        ),
    log:
        "results/logs/beir_figures.log",
    conda:
        "../../envs/data.yaml"
    params:
        settings=BEIR_FIGURES,
        datasets=BEIR_FIGURES_DATASETS,
        systems=plan.systems,
        layout=plan.table_layout,
    script:
        "../../scripts/beir_figures.py"


ANALYSIS_TARGETS.append(rules.beir_figures.output if BEIR_FIGURES_DATASETS else [])
if BEIR_FIGURES_DATASETS:
    for _view in ("versus", "wins", "hits", "lengths"):
        plan.analysis_views[f"beir_{_view}"] = [
            getattr(rules.beir_figures.output, _view)
        ]
