"""onnx_export: a sentence-transformers model's transformer as an ONNX Runtime graph.

Why not sentence-transformers' own ``backend="onnx"``: it loads through optimum-onnx, whose
0.1.0 release pins transformers < 4.58, and the sentence-transformers irflow runs needs
transformers 5. So the Hugging Face model inside the pipeline's first module (its
``Transformer``) is exported with ``torch.onnx.export`` (the TorchScript exporter, which needs
no further package) and run by ``onnxruntime.InferenceSession`` directly. Only that module's
forward is replaced (``attach``): sentence-transformers still tokenizes (prompts, max length,
truncation), and its Pooling and Normalize modules run on the graph's token embeddings as they
do under torch.

``onnx-int8`` is the same graph with dynamic int8 quantisation
(``onnxruntime.quantization.quantize_dynamic``): int8 weights, activations quantised per
batch at run time.

``onnx-fused`` is the graph rewritten by ONNX Runtime's transformer optimizer
(``onnxruntime.transformers.optimizer.optimize_model``): each layer's attention becomes one
``Attention`` node, residual + LayerNorm one ``SkipLayerNormalization``, bias + GELU one
``BiasGelu``, the embeddings one ``EmbedLayerNormalization``. The optimizer matches the
attention subgraph of "eager" attention only (the SDPA subgraph that transformers 5 exports by
default fuses nothing), so this backend's graph is traced with eager attention; it is still
float32. ``onnx-fused-int8`` quantises that graph's linear layers as ``onnx-int8`` does, and the
fused Attention nodes' query/key/value projection too (``QAttention``), except the nodes its
settings keep in float (docs/onnx.md). fp16 is not offered: ONNX Runtime's CPU provider has
float16 kernels for few operators and casts around the rest (not measured).

Every fused graph is checked at export against the unfused one on probe texts; a model whose
graph the BERT fusion rewrites to other numbers is refused (use ``onnx`` for it).

The same export serves a sentence-transformers ``CrossEncoder`` (``rerankers.<name>.backend``):
its first module is the same ``Transformer``, whose graph outputs the logits.

An exported graph carries its export key (the backend, the export settings and the model's
exact revision or file hash) in its metadata; a graph whose key is not the one the model's
settings give is refused, so a stale export is never used.
"""

from __future__ import annotations

import logging
import re
import tempfile
import warnings
from pathlib import Path

from irflow.core.atomic import atomic_path
from irflow.core.config import register_check
from irflow.core.errors import ConfigError, InputError
from irflow.core.fingerprint import value_md5
from irflow.core.settings_types import CrossEncoder, ModelModel

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "onnx-int8", "onnx-fused", "onnx-fused-int8")
ONNX_BACKENDS = BACKENDS[1:]
_TRACED = {"exporter": "torch.onnx.export(dynamo=False)", "opset": 17}
# Fusion by onnxruntime.transformers.optimizer: model_type "bert" covers BERT-style encoders
# (MiniLM, MPNet and RoBERTa checkpoints alike); heads and hidden size come from the model's
# config, so that the optimizer need not infer them from the graph. opt_level 0: only the
# optimizer's own fusions; the session applies ORT's graph optimisations when it loads.
_FUSED = _TRACED | {
    "attention": "eager",
    "fusion": {"optimizer": "onnxruntime.transformers", "model_type": "bert", "opt_level": 0},
}
# How each backend's graph is made; part of the export key, so a change here re-exports.
EXPORT_SETTINGS = {
    "onnx": _TRACED,
    "onnx-int8": _TRACED
    | {
        # Only the linear layers' weights: quantising the embedding tables (Gather) as well
        # moved MiniLM's vectors far more for little speed.
        "quantize_dynamic": {"op_types": ["MatMul"], "per_channel": True, "weight_type": "QInt8"},
    },
    "onnx-fused": _FUSED,
    "onnx-fused-int8": _FUSED
    | {
        # Chosen by nDCG@10 (benchmarks/onnx_quantization_choice.py, benchmarks/README.md):
        # every linear layer int8, the fused Attention nodes' query/key/value projection too
        # (QAttention). nDCG@10 minus torch's: SciFact -0.0019, NFCorpus -0.0004, ArguAna
        # +0.0016, and 2.36x bare sentence-transformers on 1,000 SciFact documents; with that
        # projection float (MatMul nodes only): +0.0028, -0.0018, -0.0023 and 1.84x.
        # Keeping every FFN output projection float made the vectors closer (least cosine to
        # torch on 384 SciFact documents 0.9971, against 0.9932) but not SciFact's nDCG@10
        # (+0.0031), and ran 20% slower; reduce_range: least cosine 0.9883.
        # keep_float: node-name patterns left float.
        "quantize_dynamic": {
            "op_types": ["MatMul", "Attention"],
            "per_channel": True,
            "reduce_range": False,
            "weight_type": "QInt8",
            "keep_float": [],
        },
    },
}
# Largest |fused - unfused| output on the probe texts that still counts as the same graph:
# the fused kernels sum in another order (MiniLM: about 1e-6).
FUSION_TOLERANCE = 1e-4
KEY_PROPERTY = "irflow.export_key"
OUTPUT_NAME = "token_embeddings"


def export_key(entry: dict | ModelModel, provenance: dict) -> str:
    """What the exported graph of a ``models`` entry (the config's dict, typed here, or the
    typed entry) depends on: backend, export settings, exact model files."""
    return graph_key(ModelModel.model_validate(entry).backend, provenance)


def graph_key(backend: str, provenance: dict) -> str:
    """The export key of ``backend``'s graph of the model whose files ``provenance`` names."""
    identity = {k: v for k, v in provenance.items() if k in ("revision", "files_md5")}
    return value_md5([backend, EXPORT_SETTINGS[backend], identity])


def spec_problems(name: str, spec: ModelModel | CrossEncoder, table: str = "models") -> list[str]:
    """An ONNX backend runs float32 on ONNX Runtime's CPU provider: the settings of the typed
    entry ``name`` of ``table`` (models, or rerankers for a cross-encoder) that conflict with
    that, each naming its config key."""
    if spec.backend == "torch":
        return []
    problems = []
    if spec.device not in ("auto", "cpu"):
        problems.append(
            f"config key '{table}.{name}.device': {spec.device!r} with backend "
            f"{spec.backend!r}; the ONNX backends run on the CPU (device auto or cpu): use "
            "backend torch on a GPU"
        )
    if spec.dtype not in ("auto", "float32"):
        problems.append(
            f"config key '{table}.{name}.dtype': {spec.dtype!r} with backend "
            f"{spec.backend!r}; the graph is exported in float32 (the int8 backends "
            "quantise it)"
        )
    return problems


def _transformer(model):
    """The pipeline's first module, when it is a text Transformer whose forward can be
    exported; otherwise a ConfigError."""
    from sentence_transformers.sentence_transformer.modules import Transformer

    first = model[0]
    text = getattr(first, "modality_config", {}).get("text", {})
    if not isinstance(first, Transformer) or text.get("method") != "forward":
        raise ConfigError(
            f"backend onnx: the model's first module ({type(first).__name__}) is not a text "
            "Transformer with a plain forward; use backend torch for this model"
        )
    return first


def export(model, out_path: Path, backend: str, key: str) -> dict:
    """Export ``model``'s (a float32 SentenceTransformer or CrossEncoder on the CPU)
    transformer to ``out_path`` for ``backend`` (one of ONNX_BACKENDS), stamped with ``key``;
    returns facts for the manifest."""
    import onnx
    import torch

    transformer = _transformer(model)
    settings = EXPORT_SETTINGS[backend]
    inputs = list(transformer.tokenizer.model_input_names)
    # Two texts of different lengths, so that padding and the attention mask are traced.
    sample = transformer.preprocess(["an example", "a longer example text to pad the first"])
    sample = {name: sample[name] for name in inputs}
    facts = {}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export-") as scratch:
        exported = Path(scratch) / "model.onnx"
        _trace(transformer, sample, exported, settings)
        if "fusion" in settings:
            config = transformer.model.config
            facts["fused_operators"] = _fuse(exported, Path(scratch) / "fused.onnx", config)
            exported = _checked_fusion(exported, Path(scratch) / "fused.onnx", sample)
        if "quantize_dynamic" in settings:
            exported = _quantize(exported, Path(scratch) / "int8.onnx", settings)
        graph = onnx.load(str(exported))
        onnx.helper.set_model_props(graph, {KEY_PROPERTY: key})
        with atomic_path(out_path) as tmp:
            onnx.save(graph, str(tmp))
    return facts | {
        "export_key": key,
        "export_settings": settings,
        "inputs": inputs,
        "onnx_bytes": out_path.stat().st_size,
        "torch": torch.__version__,
        "onnx": onnx.__version__,
    }


def _trace(transformer, sample: dict, out: Path, settings: dict) -> None:
    """The Hugging Face model's forward (tokenizer tensors in, the module's output out) traced
    to ``out``, with the attention implementation ``settings`` name (else the model's own)."""
    import torch

    inputs = list(sample)
    output_key = transformer.modality_config["text"]["method_output_name"]

    class Forward(torch.nn.Module):
        """The Hugging Face model's forward with positional inputs, as the exporter traces."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(inputs, tensors)), return_dict=True)[output_key]

    inner = transformer.model
    attention = inner.config._attn_implementation
    axes = {name: {0: "batch", 1: "sequence"} for name in [*inputs, OUTPUT_NAME]}
    try:
        inner.set_attn_implementation(settings.get("attention", attention))
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter is deprecated in favour of dynamo, which needs onnxscript.
            warnings.simplefilter("ignore", (DeprecationWarning, torch.jit.TracerWarning))
            torch.onnx.export(
                Forward(inner).eval(),
                tuple(sample.values()),
                str(out),
                input_names=inputs,
                output_names=[OUTPUT_NAME],
                dynamic_axes=axes,
                opset_version=settings["opset"],
                dynamo=False,
            )
    finally:
        inner.set_attn_implementation(attention)


def _fuse(source: Path, out: Path, config) -> dict:
    """ONNX Runtime's transformer fusions applied to the graph at ``source``, written to
    ``out``; returns how many nodes of each fused operator it made."""
    from onnxruntime.transformers.optimizer import optimize_model

    fusion = _FUSED["fusion"]
    optimized = optimize_model(
        str(source),
        model_type=fusion["model_type"],
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
        opt_level=fusion["opt_level"],
    )
    optimized.save_model_to_file(str(out))
    return {op: count for op, count in optimized.get_fused_operator_statistics().items() if count}


def _checked_fusion(plain: Path, fused: Path, sample: dict) -> Path:
    """``fused``, once its output on ``sample`` equals the ``plain`` graph's within
    FUSION_TOLERANCE; otherwise a ConfigError."""
    import onnxruntime as ort

    feeds = {name: tensor.numpy() for name, tensor in sample.items()}
    outputs = [
        ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        for graph in (plain, fused)
    ]
    difference = float(abs(outputs[0] - outputs[1]).max())
    if difference > FUSION_TOLERANCE:
        raise ConfigError(
            f"ONNX Runtime's BERT fusion changes this model's output by {difference:.2g} "
            f"(more than {FUSION_TOLERANCE}): its architecture does not fuse as a BERT; use "
            "backend onnx or onnx-int8 for it"
        )
    return fused


def _quantize(source: Path, out: Path, settings: dict) -> Path:
    """Dynamic int8 quantisation of the graph at ``source`` as ``settings`` give, except the
    nodes whose names match one of its ``keep_float`` patterns."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantization = settings["quantize_dynamic"]
    keep_float = [
        node.name
        for node in onnx.load(str(source)).graph.node
        if any(re.search(pattern, node.name) for pattern in quantization.get("keep_float", []))
    ]
    quantize_dynamic(
        source,
        out,
        op_types_to_quantize=quantization["op_types"],
        per_channel=quantization["per_channel"],
        reduce_range=quantization.get("reduce_range", False),
        weight_type=getattr(QuantType, quantization["weight_type"]),
        nodes_to_exclude=keep_float,
        # The fused operators (com.microsoft domain) defeat ONNX shape inference, so the
        # quantiser is told that a tensor of unknown type is float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return out


class OnnxForward:
    """A Transformer module's forward run by an ONNX Runtime session: the tokenizer's tensors
    in, the token embeddings out, where sentence-transformers' next module reads them."""

    def __init__(self, session, output_name: str):
        self.session, self.output_name = session, output_name
        self.inputs = [i.name for i in session.get_inputs()]

    def __call__(self, features: dict, **_) -> dict:
        import torch

        feeds = {name: features[name].numpy() for name in self.inputs}
        (tokens,) = self.session.run([OUTPUT_NAME], feeds)
        features[self.output_name] = torch.from_numpy(tokens)
        return features


def session(path: Path, threads: int, key: str):
    """An ONNX Runtime CPU session of the graph at ``path``, refused unless it was exported
    with ``key``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    # ORT_ENABLE_ALL (ONNX Runtime's default, stated here): its layout and CPU-specific
    # fusions on top of the graph's own, e.g. DynamicQuantizeLinear + MatMulInteger into one
    # DynamicQuantizeMatMul.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # One chain of nodes: the job's threads go to each node's kernel (intra-op), none to
    # running branches side by side (a transformer has almost none).
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Spinning threads wait on a busy core: on a shared node that took 2x the time.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # A memory pattern preallocates every intermediate of a batch's shape at once: MiniLM's
    # peak at batch 64 was 2.4 GiB with it, 1.9 GiB without (torch: 1.2), at the same speed.
    options.enable_mem_pattern = False
    loaded = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    found = loaded.get_modelmeta().custom_metadata_map.get(KEY_PROPERTY)
    if found != key:
        raise InputError(
            path,
            f"exported with key {found!r}, but the model's settings give {key!r} (another "
            "revision, backend or export settings): export it again",
        )
    return loaded


def attach(
    model, path: Path | None, spec: ModelModel | CrossEncoder, provenance: dict, threads: int
) -> str:
    """Run ``model``'s transformer on the ONNX graph at ``path`` (exported from this model
    and its typed entry); with no ``path``, export one into a temporary folder first. Returns
    the graph's export key."""
    transformer = _transformer(model)
    key = graph_key(spec.backend, provenance)
    with tempfile.TemporaryDirectory(prefix="irflow-onnx-") as scratch:
        if path is None:
            log.info("exporting the model for backend %s (no exported graph given)", spec.backend)
            path = Path(scratch) / "model.onnx"
            export(model, path, spec.backend, key)
        # The session holds the graph in memory: the temporary file may go.
        loaded = session(path, threads, key)
    transformer.forward = OnnxForward(loaded, transformer.module_output_name)
    return key


@register_check
def _model_problems(config: dict) -> list[str]:
    """The models', each typed (a reranker type that exports checks its own entries with
    spec_problems)."""
    return [
        problem
        for name, entry in config["models"].items()
        for problem in spec_problems(name, ModelModel.model_validate(entry))
    ]
