# fuse: runs combined into a new run (reciprocal rank fusion or weighted score fusion).


rule fuse:
    input:
        source="results/datasets/{dataset}/source.json",
        runs=lambda wc: expand(
            "results/runs/{{dataset}}/{run}.parquet",
            run=config["fusion"][wc.system]["runs"],
        ),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/fuse/{dataset}/{system}.json",
    log:
        "results/logs/fuse/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.fusion_systems),
    conda:
        "../envs/data.yaml"
    params:
        settings=lambda wc: config["fusion"][wc.system] | {"top_k": config["top_k"]},
    script:
        "../scripts/fuse.py"
