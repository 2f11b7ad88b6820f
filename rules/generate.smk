# generate: a dataset's corpus -> a benchmark written by a language model (AIR-Bench), an
# ordinary dataset under results/datasets/<name>/ that filter, embed, retrieve and score read
# like any other; generation/ holds the hard negatives, the generation record and the drops.
# generate_estimate: a dry run that says what generate would ask of the model (requests and
# tokens by step, what the answer cache holds, and the quality-control judge of each QC'd
# copy) and asks nothing; not part of `all`, and it reads the cache, which is no input: force
# it (-f) to estimate again.

from irflow.derived.llm.client import answer_settings

# Its datasets and inputs are its kind's (irflow.workflow.kinds.generate).
GENERATE = plan.kinds["generate"]


rule generate:
    input:
        unpack(GENERATE.inputs),
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        qrels_dev="results/datasets/{dataset}/qrels/dev.parquet",
        qrels_test="results/datasets/{dataset}/qrels/test.parquet",
        stats="results/datasets/{dataset}/stats.json",
        negatives="results/datasets/{dataset}/generation/negatives.parquet",
        generation="results/datasets/{dataset}/generation/generation.parquet",
        dropped="results/datasets/{dataset}/generation/dropped.parquet",
        manifest="results/manifests/generate/{dataset}.json",
    log:
        "results/logs/generate/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(GENERATE.datasets),
    conda:
        "../envs/generate.yaml"
    params:
        spec=GENERATE.spec,
        # Only what changes the answers: a new address, concurrency or timeout reruns nothing.
        llm=answer_settings(config["llm"]) if GENERATE.datasets else {},
        tokenizer=GENERATE.tokenizer,
    script:
        "../scripts/generate.py"


rule generate_estimate:
    input:
        unpack(GENERATE.estimate_inputs),
    output:
        "results/llm_estimate/{dataset}.json",
    log:
        "results/logs/generate_estimate/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(GENERATE.datasets),
    conda:
        "../envs/generate.yaml"
    params:
        spec=GENERATE.spec,
        tokenizer=GENERATE.tokenizer,
        quality_control=GENERATE.estimate_quality_control,
        judge=config["quality_control"]["judge"],
        majority=config["quality_control"]["majority"],
        rerankers=len(plan.qc_rerankers),
    script:
        "../scripts/generate_estimate.py"
