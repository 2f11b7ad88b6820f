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

An exported graph carries its export key (the backend, the export settings and the model's
exact revision or file hash) in its metadata; a graph whose key is not the one the model's
settings give is refused, so a stale export is never used.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path

from irflow.core.config import register_check
from irflow.core.errors import ConfigError, InputError
from irflow.core.fingerprint import value_md5

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "onnx-int8")
# How each backend's graph is made; part of the export key, so a change here re-exports.
EXPORT_SETTINGS = {
    "onnx": {"exporter": "torch.onnx.export(dynamo=False)", "opset": 17},
    "onnx-int8": {
        "exporter": "torch.onnx.export(dynamo=False)",
        "opset": 17,
        # Only the linear layers' weights: quantising the embedding tables (Gather) as well
        # moved MiniLM's vectors far more for little speed.
        "quantize_dynamic": {"op_types": ["MatMul"], "per_channel": True, "weight_type": "QInt8"},
    },
}
KEY_PROPERTY = "irflow.export_key"
OUTPUT_NAME = "token_embeddings"


def export_key(spec: dict, provenance: dict) -> str:
    """What an exported graph depends on: backend, export settings, exact model files."""
    identity = {k: v for k, v in provenance.items() if k in ("revision", "files_md5")}
    return value_md5([spec["backend"], EXPORT_SETTINGS[spec["backend"]], identity])


def spec_problems(name: str, spec: dict) -> list[str]:
    """An ONNX backend runs float32 on ONNX Runtime's CPU provider: the settings of model
    ``name`` that conflict with that, each naming its config key."""
    if spec["backend"] == "torch":
        return []
    problems = []
    if spec["device"] not in ("auto", "cpu"):
        problems.append(
            f"config key 'models.{name}.device': {spec['device']!r} with backend "
            f"{spec['backend']!r}; the ONNX backends run on the CPU (device auto or cpu): use "
            "backend torch on a GPU"
        )
    if spec["dtype"] not in ("auto", "float32"):
        problems.append(
            f"config key 'models.{name}.dtype': {spec['dtype']!r} with backend "
            f"{spec['backend']!r}; the graph is exported in float32 (onnx-int8 quantises it)"
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
    """Export ``model``'s (a float32 SentenceTransformer on the CPU) transformer to
    ``out_path`` for ``backend`` (onnx or onnx-int8), stamped with ``key``; returns facts for
    the manifest."""
    import onnx
    import torch

    transformer = _transformer(model)
    inputs = list(transformer.tokenizer.model_input_names)
    output_key = transformer.modality_config["text"]["method_output_name"]

    class Forward(torch.nn.Module):
        """The Hugging Face model's forward with positional inputs, as the exporter traces."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(inputs, tensors)), return_dict=True)[output_key]

    # Two texts of different lengths, so that padding and the attention mask are traced.
    sample = transformer.preprocess(["an example", "a longer example text to pad the first"])
    axes = {name: {0: "batch", 1: "sequence"} for name in [*inputs, OUTPUT_NAME]}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".export-") as scratch:
        exported = Path(scratch) / "model.onnx"
        with warnings.catch_warnings(), torch.no_grad():
            # The TorchScript exporter is deprecated in favour of dynamo, which needs onnxscript.
            warnings.simplefilter("ignore", (DeprecationWarning, torch.jit.TracerWarning))
            torch.onnx.export(
                Forward(transformer.model).eval(),
                tuple(sample[name] for name in inputs),
                str(exported),
                input_names=inputs,
                output_names=[OUTPUT_NAME],
                dynamic_axes=axes,
                opset_version=EXPORT_SETTINGS[backend]["opset"],
                dynamo=False,
            )
        if backend == "onnx-int8":
            exported = _quantize(exported, Path(scratch) / "int8.onnx")
        graph = onnx.load(str(exported))
        onnx.helper.set_model_props(graph, {KEY_PROPERTY: key})
        tmp = out_path.with_name(f".{out_path.name}.tmp")
        onnx.save(graph, str(tmp))
        tmp.replace(out_path)
    return {
        "export_key": key,
        "export_settings": EXPORT_SETTINGS[backend],
        "inputs": inputs,
        "onnx_bytes": out_path.stat().st_size,
        "torch": torch.__version__,
        "onnx": onnx.__version__,
    }


def _quantize(source: Path, out: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    settings = EXPORT_SETTINGS["onnx-int8"]["quantize_dynamic"]
    quantize_dynamic(
        source,
        out,
        op_types_to_quantize=settings["op_types"],
        per_channel=settings["per_channel"],
        weight_type=getattr(QuantType, settings["weight_type"]),
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


def attach(model, path: Path | None, spec: dict, provenance: dict, threads: int) -> str:
    """Run ``model``'s transformer on the ONNX graph at ``path`` (exported from this model
    and its settings); with no ``path``, export one into a temporary folder first. Returns
    the graph's export key."""
    transformer = _transformer(model)
    key = export_key(spec, provenance)
    with tempfile.TemporaryDirectory(prefix="irflow-onnx-") as scratch:
        if path is None:
            log.info(
                "exporting the model for backend %s (no exported graph given)", spec["backend"]
            )
            path = Path(scratch) / "model.onnx"
            export(model, path, spec["backend"], key)
        # The session holds the graph in memory: the temporary file may go.
        loaded = session(path, threads, key)
    transformer.forward = OnnxForward(loaded, transformer.module_output_name)
    return key


@register_check
def _model_problems(config: dict) -> list[str]:
    return [
        problem for name, spec in config["models"].items() for problem in spec_problems(name, spec)
    ]
