# external_run: a run made outside irflow (a TREC run file or a Parquet run, from a path or a
# URL) checked against the dataset and written as the run contract, like any retriever's.


rule external_run:
    input:
        unpack(plan.external_run_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/external_run/{dataset}/{system}.json",
    log:
        "results/logs/external_run/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.searched_by["external_run"]),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda wc, input, attempt: memory.external_run_mb(
            input.corpus, input.queries, config["top_k"], attempt
        ),
    params:
        settings=plan.external_run_settings,
    script:
        "../scripts/external_run.py"
