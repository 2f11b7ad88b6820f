# saliency_pairs: PosIR's (query, relevant document) pairs of the saliency dataset, selected
# once with one named tokenizer (position_analysis.saliency.tokenizer), so that every model is
# profiled on the same pairs. saliency: PosIR §5.3 gradient saliency of each configured model
# over those pairs -> a mean at each of `bins` relative positions of the whole document
# (PosIR's linear interpolation by default; zero past the model's window). See
# irflow.analyses.saliency.

from irflow.analyses.saliency import pairs_tokenizer
from irflow.data.tokens import tokenizer_source

SALIENCY = config["position_analysis"]["saliency"]
# Models whose gradient saliency profile (PosIR §5.3) is computed.
SALIENCY_MODELS = SALIENCY["models"]
SALIENCY_PAIRS = f"results/saliency/pairs/{SALIENCY['dataset']}.parquet"
SALIENCY_TOKENIZER = pairs_tokenizer(config)


rule saliency_pairs:
    input:
        queries=f"results/datasets/{SALIENCY['dataset']}/queries.parquet",
        corpus=f"results/datasets/{SALIENCY['dataset']}/corpus.parquet",
        qrels=f"results/datasets/{SALIENCY['dataset']}/qrels.parquet",
    output:
        pairs=SALIENCY_PAIRS,
    log:
        f"results/logs/saliency_pairs/{SALIENCY['dataset']}.log",
    conda:
        "../../envs/positionalize.yaml"
    params:
        dataset=SALIENCY["dataset"],
        tokenizer=(
            tokenizer_source(SALIENCY_TOKENIZER, config["models"])
            if SALIENCY_TOKENIZER and SALIENCY["select"] == "posir"
            else None
        ),
        selection={
            key: SALIENCY[key]
            for key in ("select", "queries", "min_tokens", "centre", "seed")
        },
    script:
        "../../scripts/saliency_pairs.py"


rule saliency:
    input:
        pairs=SALIENCY_PAIRS,
        model=plan.model_files,
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
        dataset=SALIENCY["dataset"],
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
