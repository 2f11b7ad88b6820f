# onnx_export: a dense model's transformer as an ONNX Runtime graph (float32, or int8 weights,
# plain or fused), for models with an ONNX backend (ONNX_BACKENDS). Exported once per (model,
# backend), keyed by the model's files and revision (inputs, params) and the export settings
# (params); every embed job of the model runs on it. See irflow.encoding.onnx_export.

from irflow.encoding.onnx_export import ONNX_BACKENDS


rule onnx_export:
    input:
        model=plan.model_files,
    output:
        graph="results/onnx/{model}/{backend}/model.onnx",
        manifest="results/manifests/onnx_export/{model}/{backend}.json",
    log:
        "results/logs/onnx_export/{model}/{backend}.log",
    wildcard_constraints:
        model=one_of(plan.onnx_models),
        backend=one_of(ONNX_BACKENDS),
    conda:
        "../envs/models.yaml"
    threads: 1
    resources:
        # The model in float32 and its traced graph: below an embed job's peak.
        mem_mb=lambda wc, attempt: memory.embed_mb(attempt),
    params:
        # What the graph depends on besides the model's files, so that changing it re-exports.
        settings=lambda wc: plan.onnx_export_settings(wc.model, wc.backend),
    script:
        "../scripts/onnx_export.py"
