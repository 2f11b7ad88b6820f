# correlate: how far orderings of systems agree between datasets, metrics, benchmarks and a
# reference leaderboard, and per length bucket of the position analysis (PosIR); AIR-Bench's
# bootstrap; corpus similarity (weighted Jaccard).


rule unigrams:
    input:
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
    output:
        "results/datasets/{dataset}/unigrams.parquet",
    log:
        "results/logs/unigrams/{dataset}.log",
    conda:
        "../envs/data.yaml"
    params:
        words=config["correlation"]["similarity_words"],
    script:
        "../scripts/unigrams.py"


rule correlate:
    input:
        summary="results/summary.parquet",
        per_query="results/per_query.parquet",
        unigrams=expand(
            "results/datasets/{dataset}/unigrams.parquet",
            dataset=plan.correlated_datasets,
        ),
        reference=plan.correlation_reference,
        psi=["results/psi.parquet"] if plan.position_datasets else [],
        # The published scores each length bucket's ranking is also compared with.
        published=(
            [workflow.source_path("../config/reference/published.yaml")]
            if plan.position_datasets and config["position_analysis"]["published"]
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
        buckets={spec["block"]: [spec["dataset"]] for spec in plan.variants.values()},
        published_datasets=config["position_analysis"]["published"],
        identities=plan.published_identities,
    script:
        "../scripts/correlate.py"
