# position: per-query scores on the positionalized variants (and datasets whose qrels carry
# spans) -> mean score per length bucket and relative-position bin, each bucket's PSI and trend
# (PosIR), and the same per query type (PosIR's Table 6 heuristic); the plots, PSI and query-type
# tables of the report. See irflow.analyses.position and irflow.analyses.query_types.

from irflow.analyses.position import position_groups

# The positional variants (irflow.workflow.kinds.positionalize), and the datasets whose qrels
# carry spans.
POSITION_VARIANTS = plan.kinds["positionalize"].datasets
POSITION_DATASETS = sorted(POSITION_VARIANTS) + config["position_analysis"]["datasets"]


rule position:
    input:
        scores=[
            f"results/scores/{d}/{s}.parquet"
            for d in POSITION_DATASETS
            for s in plan.systems
        ],
        qrels=[f"results/datasets/{d}/qrels.parquet" for d in POSITION_DATASETS],
        corpus=[f"results/datasets/{d}/corpus.parquet" for d in POSITION_DATASETS],
        queries=[f"results/datasets/{d}/queries.parquet" for d in POSITION_DATASETS],
    output:
        bins="results/position_bins.parquet",
        psi="results/psi.parquet",
        types="results/query_types.parquet",
    log:
        "results/logs/position.log",
    conda:
        "../../envs/positionalize.yaml"
    params:
        analysis=config["position_analysis"],
        datasets=POSITION_DATASETS,
        groups=position_groups(config, POSITION_VARIANTS, POSITION_DATASETS),
        systems=plan.systems,
    script:
        "../../scripts/position.py"


rule position_plots:
    input:
        bins="results/position_bins.parquet",
        psi="results/psi.parquet",
        types="results/query_types.parquet",
    output:
        curves=report(
            "results/plots/position.png",
            caption="../../report/position.rst",
            category="Position bias",
        ),
        psi_table=report(
            "results/report/psi_table.html",
            caption="../../report/psi_table.rst",
            category="Position bias",
        ),
        types_table=report(
            "results/report/query_types.html",
            caption="../../report/query_types.rst",
            category="Position bias",
        ),
    log:
        "results/logs/position_plots.log",
    conda:
        "../../envs/data.yaml"
    script:
        "../../scripts/position_plots.py"


ANALYSIS_TARGETS.append(rules.position_plots.output if POSITION_DATASETS else [])
if POSITION_DATASETS:
    plan.analysis_views["position_bins"] = ["results/position_bins.parquet"]
    plan.analysis_views["psi"] = ["results/psi.parquet"]
    plan.analysis_views["query_types"] = ["results/query_types.parquet"]
