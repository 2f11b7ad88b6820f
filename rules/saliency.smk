# saliency: PosIR §5.3 gradient saliency of each configured model over the relevant documents
# of one dataset's sampled queries -> a mean at each of `bins` relative positions of the whole
# document (PosIR's linear interpolation by default; zero past the model's window). See
# irflow.analyses.saliency.

SALIENCY = config["position_analysis"]["saliency"]


rule saliency:
    input:
        queries=f"results/datasets/{SALIENCY['dataset']}/queries.parquet",
        corpus=f"results/datasets/{SALIENCY['dataset']}/corpus.parquet",
        qrels=f"results/datasets/{SALIENCY['dataset']}/qrels.parquet",
        model=plan.model_files,
    output:
        profile="results/saliency/{model}.parquet",
    log:
        "results/logs/saliency/{model}.log",
    wildcard_constraints:
        model=one_of(plan.saliency_models),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
    params:
        # The settings that change the profile (device and batch size do not), so that editing
        # one reruns the job; the script loads the model from the full spec in config.
        model_settings=lambda wc: plan.model_result_settings(wc.model),
        dataset=SALIENCY["dataset"],
        analysis={
            key: SALIENCY[key]
            for key in (
                "select",
                "queries",
                "min_tokens",
                "centre",
                "seed",
                "bins",
                "resample",
            )
        },
    script:
        "../scripts/saliency.py"


rule saliency_plot:
    input:
        profiles=expand("results/saliency/{model}.parquet", model=plan.saliency_models),
    output:
        figure=report(
            "results/plots/saliency.png",
            caption="../report/saliency.rst",
            category="Position bias",
        ),
    log:
        "results/logs/saliency_plot.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/saliency_plot.py"
