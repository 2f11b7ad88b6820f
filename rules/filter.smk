# filter: drop empty, out-of-bounds and duplicate documents, and, when configured, documents
# failing the quality filters and near-duplicates (judged ones are flagged, not dropped, by
# default); keep the queries that have judgements in the split. A document-expanded copy
# (expand) keeps exactly its base's filtered documents, so both rank the same corpus.
# A curated dataset's tables (rules/curate.smk) are filtered with its own filter block.
# filter_summary: what every filter removed and flagged, for the report.


rule filter:
    input:
        unpack(plan.filter_inputs),
    output:
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
        queries="results/datasets/{dataset}/filtered/queries.parquet",
        audit="results/datasets/{dataset}/filtered/audit.parquet",
        clusters="results/datasets/{dataset}/filtered/clusters.parquet",
        manifest="results/manifests/filter/{dataset}.json",
    log:
        "results/logs/filter/{dataset}.log",
    conda:
        "../envs/data.yaml"
    threads: 4  # quality filters and MinHash signatures, one process each; capped by --cores
    resources:
        mem_mb=lambda wc, input, attempt: memory.filter_mb(input.corpus, attempt),
    params:
        rules=plan.filter_rules,
    script:
        "../scripts/filter.py"


rule filter_summary:
    input:
        corpus=expand(
            "results/datasets/{dataset}/corpus.parquet", dataset=plan.datasets
        ),
        filtered=expand(
            "results/datasets/{dataset}/filtered/corpus.parquet", dataset=plan.datasets
        ),
        audit=expand(
            "results/datasets/{dataset}/filtered/audit.parquet", dataset=plan.datasets
        ),
        clusters=expand(
            "results/datasets/{dataset}/filtered/clusters.parquet",
            dataset=plan.datasets,
        ),
    output:
        summary="results/filter_summary.parquet",
        table=report(
            "results/report/filter_table.html",
            caption="../report/filter_table.rst",
            category="Tables",
        ),
    log:
        "results/logs/filter_summary.log",
    conda:
        "../envs/data.yaml"
    params:
        datasets=plan.datasets,
    script:
        "../scripts/filter_summary.py"
