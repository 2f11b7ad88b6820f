# onnx_export: a dense model's transformer as an ONNX Runtime graph (float32, or int8 weights),
# for models with backend onnx or onnx-int8. Exported once per (model, backend), keyed by the
# model's files and revision (inputs, params) and the export settings (params); every embed
# job of the model runs on it. See irflow.onnx_export.

from irflow.onnx_export import EXPORT_SETTINGS

ONNX_MODELS = [m for m in DENSE_MODELS if config["models"][m]["backend"] != "torch"]


def onnx_graph(wildcards):
    """The exported graph an embed job of this model runs on; none for backend torch."""
    backend = config["models"][wildcards.model]["backend"]
    if backend == "torch":
        return []
    return f"results/onnx/{wildcards.model}/{backend}/model.onnx"


def onnx_export_settings(model, backend):
    spec = config["models"][model]
    return {
        "id": spec["id"],
        "revision": spec["revision"],
        "backend": backend,
        "export": EXPORT_SETTINGS[backend],
    }


rule onnx_export:
    input:
        model=model_files,
    output:
        graph="results/onnx/{model}/{backend}/model.onnx",
        manifest="results/manifests/onnx_export/{model}/{backend}.json",
    log:
        "results/logs/onnx_export/{model}/{backend}.log",
    wildcard_constraints:
        model=one_of(ONNX_MODELS),
        backend="onnx|onnx-int8",
    conda:
        "../envs/models.yaml"
    threads: 1
    resources:
        # The model in float32 and its traced graph: below an embed job's peak.
        mem_mb=lambda wc, attempt: memory.embed_mb(attempt),
    params:
        # What the graph depends on besides the model's files, so that changing it re-exports.
        settings=lambda wc: onnx_export_settings(wc.model, wc.backend),
    script:
        "../scripts/onnx_export.py"
