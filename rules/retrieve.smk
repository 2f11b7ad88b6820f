# retrieve: first-stage runs, top_k per query, as Parquet and TREC run files.
# Hits whose doc id equals the query id are removed where the dataset asks for it.


rule retrieve_bm25:
    input:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
        queries="results/datasets/{dataset}/filtered/queries.parquet",
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(BM25_SYSTEMS),
    conda:
        "../envs/data.yaml"
    threads: 1  # bm25s scores one query at a time, in numpy, on one core
    resources:
        mem_mb=lambda wc, input, attempt: memory.bm25_mb(input.corpus, attempt),
        disk_mb=lambda wc, input: memory.bm25_tmp_mb(input.corpus),  # postings in TMPDIR
    params:
        settings=retrieval_settings,
    script:
        "../scripts/retrieve.py"


rule retrieve_dense:
    input:
        unpack(dense_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(DENSE_SYSTEMS),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        mem_mb=lambda wc, input, attempt: memory.dense_search_mb(
            input.index,
            input.queries,
            retrieval_settings(wc)["index"],
            attempt,
            documents=input.corpus,
        ),
    params:
        settings=retrieval_settings,
    script:
        "../scripts/retrieve.py"
