# correlate: how far orderings of systems agree between datasets, metrics, benchmarks and a
# reference leaderboard, and per length bucket of the position analysis (PosIR); AIR-Bench's
# bootstrap; corpus similarity (weighted Jaccard) of the datasets' unigrams (rules/unigrams.smk).

# The published scores a length bucket's ranking is compared with (position_analysis.published).
PUBLISHED_SCORES = workflow.source_path("../config/reference/published.yaml")


rule correlate:
    input:
        summary="results/summary.parquet",
        per_query="results/per_query.parquet",
        unigrams=expand(
            "results/datasets/{dataset}/unigrams.parquet",
            dataset=plan.correlated_datasets,
        ),
        reference=plan.correlation_reference,
        # The position analysis's PSI table, when it runs (rules/analyses/position.smk).
        psi=lambda wc: plan.analysis_views.get("psi", []),
        # The published scores each length bucket's ranking is also compared with.
        published=lambda wc: (
            [PUBLISHED_SCORES]
            if plan.analysis_views.get("psi")
            and config["position_analysis"]["published"]
            else []
        ),
    output:
        correlations="results/correlations.parquet",
        bootstrap="results/bootstrap.parquet",
        similarity="results/corpus_similarity.parquet",
    log:
        "results/logs/correlate.log",
    conda:
        "../envs/data.yaml"
    params:
        settings=config["correlation"],
        # Real datasets, and generated ones (with their quality-controlled copies) to compare.
        datasets=plan.correlated_datasets,
        # Each length bucket's ranking against the dataset a positionalize block was built from.
        buckets={
            spec["block"]: [spec["dataset"]]
            for spec in plan.kinds["positionalize"].datasets.values()
        },
        published_datasets=config["position_analysis"]["published"],
        identities=plan.published_identities,
    script:
        "../scripts/correlate.py"
