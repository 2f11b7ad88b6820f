# retrieve: first-stage runs, top_k per query, as Parquet and TREC run files.
# Hits whose doc id equals the query id are removed where the dataset asks for it.


# BM25 searches the index its index_bm25 job saved (rules/index.smk), memory-mapped.
rule retrieve_bm25:
    input:
        unpack(plan.bm25_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.searched_by["retrieve_bm25"]),
    conda:
        "../envs/data.yaml"
    threads: 1  # bm25s scores one query at a time, in numpy, on one core
    resources:
        mem_mb=plan.search_mb,
    params:
        settings=plan.retrieval_settings,
    script:
        "../scripts/retrieve.py"


rule retrieve_dense:
    input:
        unpack(plan.dense_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.searched_by["retrieve_dense"]),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        mem_mb=plan.search_mb,
    params:
        settings=plan.retrieval_settings,
    script:
        "../scripts/retrieve.py"


# Lucene's BM25 (Anserini) searches the index of its layout that index_lucene built
# (rules/index.smk).
rule retrieve_lucene:
    input:
        unpack(plan.search_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.searched_by["retrieve_lucene"]),
    conda:
        "../envs/lucene.yaml"
    threads: 1  # Anserini's search threads (-threads), capped by --cores
    resources:
        mem_mb=plan.search_mb,
    params:
        settings=plan.retrieval_settings,
    script:
        "../scripts/retrieve.py"


# A retriever class of the user's (type python, or an irflow.retrievers entry point), run by
# irflow.retrieval.custom on the filtered corpus and queries.
rule retrieve_python:
    input:
        unpack(plan.search_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.searched_by["retrieve_python"]),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=plan.search_mb,
    params:
        settings=plan.retrieval_settings,
    script:
        "../scripts/retrieve.py"


# Learned sparse and late-interaction retrievers search, exactly, the vectors that their
# encode_vectors jobs wrote (rules/vectors.smk; irflow.retrieval.sparse,
# irflow.retrieval.late_interaction).
rule retrieve_sparse:
    input:
        unpack(plan.vector_search_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.searched_by["retrieve_sparse"]),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        mem_mb=plan.search_mb,
    params:
        settings=plan.retrieval_settings,
    script:
        "../scripts/retrieve.py"


use rule retrieve_sparse as retrieve_late_interaction with:
    wildcard_constraints:
        system=one_of(plan.searched_by["retrieve_late_interaction"]),
