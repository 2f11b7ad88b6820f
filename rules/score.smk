# score: a run and the split's qrels -> per-query values of every configured measure.


rule score:
    input:
        source="results/datasets/{dataset}/source.json",
        run="results/runs/{dataset}/{system}.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
    output:
        scores="results/scores/{dataset}/{system}.parquet",
        manifest="results/manifests/score/{dataset}/{system}.json",
    log:
        "results/logs/score/{dataset}/{system}.log",
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda wc, input, attempt: memory.score_mb(input.run, attempt),
    params:
        measures=config["metrics"],
    script:
        "../scripts/score.py"
