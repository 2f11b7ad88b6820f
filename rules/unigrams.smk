# unigrams: each filtered corpus's unigram counts, stopwords left out
# (irflow.analyses.correlate.unigram_counts), for the corpus similarity that correlate computes.


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
