# score: a run and the split's qrels -> per-query values of every configured measure.


rule score:
    input:
        run="results/runs/{dataset}/{system}.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
    output:
        scores="results/scores/{dataset}/{system}.parquet",
        manifest="results/manifests/score/{dataset}/{system}.json",
    params:
        measures=config["metrics"],
    log:
        "results/logs/score/{dataset}/{system}.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/score.py"
