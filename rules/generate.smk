# generate: a dataset's corpus -> a benchmark written by a language model (AIR-Bench), an
# ordinary dataset under results/datasets/<name>/ that filter, embed, retrieve and score read
# like any other; generation/ holds the hard negatives, the generation record and the drops.

from irflow.llm import answer_settings


rule generate:
    input:
        unpack(generate_inputs),
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        stats="results/datasets/{dataset}/stats.json",
        negatives="results/datasets/{dataset}/generation/negatives.parquet",
        generation="results/datasets/{dataset}/generation/generation.parquet",
        dropped="results/datasets/{dataset}/generation/dropped.parquet",
        manifest="results/manifests/generate/{dataset}.json",
    log:
        "results/logs/generate/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(GENERATED),
    conda:
        "../envs/generate.yaml"
    params:
        spec=lambda wc: GENERATED[wc.dataset],
        # Only what changes the answers: a new address, concurrency or timeout reruns nothing.
        llm=answer_settings(config["llm"]) if GENERATED else {},
        tokenizer=lambda wc: (
            tokenizer_source(GENERATED[wc.dataset]["tokenizer"], config["models"])
            if GENERATED[wc.dataset]["tokenizer"]
            else None
        ),
    script:
        "../scripts/generate.py"
