# saliency_pairs: PosIR's (query, relevant document) pairs of each saliency dataset, selected
# once with one named tokenizer (position_analysis.saliency.tokenizer), so that every model is
# profiled on the same pairs. saliency: PosIR §5.3 gradient saliency of each configured model
# over those pairs -> a mean at each of `bins` relative positions of the whole document
# (PosIR's linear interpolation by default; zero past the model's window), per dataset and
# over every pair pooled (dataset `all`). See irflow.analyses.saliency.

from irflow.analyses.saliency import pairs_tokenizer_source

SALIENCY = config["position_analysis"]["saliency"]
# Models whose gradient saliency profile (PosIR §5.3) is computed.
SALIENCY_MODELS = SALIENCY["models"]
SALIENCY_PAIRS = expand(
    "results/saliency/pairs/{dataset}.parquet", dataset=SALIENCY["datasets"]
)


rule saliency_pairs:
    input:
        queries="results/datasets/{dataset}/queries.parquet",
        corpus="results/datasets/{dataset}/corpus.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
    output:
        pairs="results/saliency/pairs/{dataset}.parquet",
    log:
        "results/logs/saliency_pairs/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(SALIENCY["datasets"]),
    conda:
        "../../envs/positionalize.yaml"
    params:
        # Counts the dataset's documents for PosIR's selection, once for every model.
        tokenizer=lambda wc: pairs_tokenizer_source(config, wc.dataset),
        selection={
            key: SALIENCY[key]
            for key in ("select", "queries", "min_tokens", "centre", "seed")
        },
    script:
        "../../scripts/saliency_pairs.py"


rule saliency:
    input:
        pairs=SALIENCY_PAIRS,
        model=lambda wc: plan.model_inputs(wc.model),
    output:
        profile="results/saliency/{model}.parquet",
    log:
        "results/logs/saliency/{model}.log",
    wildcard_constraints:
        model=one_of(SALIENCY_MODELS),
    conda:
        "../../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
    params:
        # The settings that change the profile (device and batch size do not), so that editing
        # one reruns the job; the script loads the model from the full spec in config.
        model_settings=lambda wc: plan.model_result_settings(wc.model),
        datasets=SALIENCY["datasets"],
        analysis={key: SALIENCY[key] for key in ("bins", "resample")},
    script:
        "../../scripts/saliency.py"


rule saliency_plot:
    input:
        profiles=expand("results/saliency/{model}.parquet", model=SALIENCY_MODELS),
    output:
        figure=report(
            "results/plots/saliency.png",
            caption="../../report/saliency.rst",
            category="Position bias",
        ),
        table=report(
            "results/report/saliency_table.html",
            caption="../../report/saliency_table.rst",
            category="Position bias",
        ),
    log:
        "results/logs/saliency_plot.log",
    conda:
        "../../envs/data.yaml"
    script:
        "../../scripts/saliency_plot.py"


ANALYSIS_TARGETS.append(rules.saliency_plot.output if SALIENCY_MODELS else [])
if SALIENCY_MODELS:
    plan.analysis_views["saliency"] = [
        f"results/saliency/{m}.parquet" for m in SALIENCY_MODELS
    ]
