# position: per-query scores on the positionalized variants -> mean score per length bucket and
# relative-position bin, and each bucket's PSI and trend (PosIR). See irflow.position.

def position_tokenizers():
    """Per variant, what counts its documents' tokens: position_analysis.tokenizer, or the
    variant's own."""
    chosen = config["position_analysis"]["tokenizer"]
    return {
        variant: tokenizer_source(chosen or spec["tokenizer"], config["models"])
        for variant, spec in VARIANTS.items()
    }


rule position:
    input:
        scores=[f"results/scores/{v}/{s}.parquet" for v in VARIANTS for s in SYSTEMS],
        qrels=[f"results/datasets/{v}/qrels.parquet" for v in VARIANTS],
        corpus=[f"results/datasets/{v}/corpus.parquet" for v in VARIANTS],
    output:
        bins="results/position_bins.parquet",
        psi="results/psi.parquet",
    log:
        "results/logs/position.log",
    conda:
        "../envs/positionalize.yaml"
    params:
        analysis=config["position_analysis"],
        variants=VARIANTS,
        systems=SYSTEMS,
        pairs=[(v, s) for v in VARIANTS for s in SYSTEMS],
        tokenizers=position_tokenizers(),
    script:
        "../scripts/position.py"
