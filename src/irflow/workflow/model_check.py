"""model_check: every model and tokenizer a config names must be loadable, checked before any
job runs. Under ``offline: true``, it must be a folder, in the Hugging Face cache or in its
``local_copy`` (checked when the config is); online, the Hugging Face hub must answer for it
(checked when the run starts, ``hub_model_problems``).

Offline, a job reads a Hugging Face id from the cache alone, then from its ``local_copy``
(irflow.encoding.models.resolve_model, which load_tokenizer calls for a model key's tokenizer
too); one that is not there used to fail at run time, with
the library's advice to pass ``local_files_only=False``, after the jobs before it had run. The
lookup here is the jobs' own: huggingface_hub's ``snapshot_download`` with
``local_files_only``, which reads the cache and never the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from irflow.core.offline import env_offline
from irflow.core.settings_types import LocalCopy1, LocalCopy2
from irflow.encoding.models import (
    LocalCopyError,
    checked_local_copy,
    local_copy_folder,
    model_source,
)

# The blocks whose entries name a model by ``id`` (and ``revision``): the encoders (dense,
# SPLADE, ColBERT), the rerankers (cross-encoders) and document expansion's models.
MODEL_BLOCKS = ("models", "rerankers", "expand")


def named_models(config: dict) -> Iterator[tuple[str, dict]]:
    """(config key, spec with ``id`` and maybe ``revision`` and ``local_copy``) of each model
    and tokenizer the config names; a tokenizer that is a key of ``models`` is that model,
    named once."""
    for block in MODEL_BLOCKS:
        yield from _ids(config.get(block) or {}, block)
    yield from _tokenizers(config, "", set(config.get("models") or {}))


def _ids(value, key: str) -> Iterator[tuple[str, dict]]:
    if not isinstance(value, dict):
        return
    if isinstance(value.get("id"), str):
        yield f"{key}.id", value
    for name, item in value.items():
        yield from _ids(item, f"{key}.{name}")


def _tokenizers(value, key: str, model_names: set) -> Iterator[tuple[str, dict]]:
    if isinstance(value, list):
        for position, item in enumerate(value):
            yield from _tokenizers(item, f"{key}[{position}]", model_names)
    if not isinstance(value, dict):
        return
    for name, item in value.items():
        place = f"{key}.{name}" if key else str(name)
        if name == "tokenizer" and isinstance(item, str) and item not in model_names:
            yield place, {"id": item}
        else:
            yield from _tokenizers(item, place, model_names)


def offline_model_problems(config: dict) -> list[str]:
    """One line per model or tokenizer that ``offline: true`` cannot load: neither a folder,
    nor in the Hugging Face cache, nor in its ``local_copy`` (or a copy whose files are not
    those its ``files_md5`` pins); each names its config key and the fix. None when online."""
    if not config.get("offline"):
        return []
    found = (_offline_problem(key, spec) for key, spec in named_models(config))
    return [problem for problem in found if problem]


def _offline_problem(key: str, spec: dict) -> str | None:
    """Why a job cannot read ``spec``'s model offline (irflow.encoding.models.resolve_model
    reads a folder, the Hugging Face cache, then the ``local_copy``); None when it can."""
    model_id, revision, copy = model_source(spec)
    if Path(model_id).is_dir() or _cached(model_id, revision):
        return None
    if copy is not None and _copy_folder(copy).is_dir():
        try:
            checked_local_copy(copy)
        except LocalCopyError as error:
            where = key.removesuffix(".id")
            return f"{where}.local_copy.files_md5: {error}; point it at {model_id!r}'s files"
        return None
    from huggingface_hub.constants import HF_HUB_CACHE

    missing = "" if copy is None else f", nor in its local_copy ({_copy_folder(copy)})"
    return (
        f"{key}: {model_id!r} is not a folder and not in the Hugging Face cache "
        f"({HF_HUB_CACHE}){missing}, and offline: true forbids downloading it; "
        f"give a local folder or a local_copy, or run once online{_reranker_hint(key)}"
    )


def _reranker_hint(key: str) -> str:
    """What runs offline instead of a cross-encoder: the install ships none."""
    if not key.startswith("rerankers."):
        return ""
    return (
        ". The install ships no cross-encoder: a `type: bi-encoder` reranker over a `models` "
        'entry (the shipped all-MiniLM-L6-v2) runs offline (docs/retrievers.md, "Rerankers '
        'offline")'
    )


def read_folder(spec: dict, offline: bool) -> Path | None:
    """The folder a job reads ``spec``'s model from (irflow.encoding.models.resolve_model): its
    ``id`` when that is a folder; offline, its ``local_copy`` when the Hugging Face cache does
    not hold it. None for a Hub snapshot, which its revision names."""
    model_id, revision, copy = model_source(spec)
    if Path(model_id).is_dir():
        return Path(model_id)
    if copy is None or not (offline or env_offline()) or _cached(model_id, revision):
        return None
    return _copy_folder(copy)


def _copy_folder(copy: LocalCopy1 | LocalCopy2) -> Path:
    try:
        return local_copy_folder(copy)
    except ModuleNotFoundError:  # a package that is not installed ships nothing
        return Path(copy.package, copy.folder) / "<not installed>"


def _cached(model_id: str, revision: str | None) -> bool:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        snapshot_download(model_id, revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, HFValidationError):  # not there, or no valid repo id
        return False
    return True


def hub_model_problems(config: dict) -> list[str]:
    """Online, one line per model or tokenizer whose job would fail on the Hugging Face hub:
    the hub cannot be reached, or has no such repository or revision; each names its config
    key and the fix. None offline (``offline: true``, or ``HF_HUB_OFFLINE=1``, which jobs obey
    too) and none when no entry reads the hub.

    Only an entry neither a folder nor cached is asked for: a job reads a cached model from the
    cache when the hub cannot be reached (``resolve_model``; transformers does for a
    tokenizer), and it is not known here which jobs will run. The first request is the probe:
    when it cannot reach the hub, no other is sent and every entry gets the line; when it can,
    each further entry is one metadata request, with huggingface_hub's metadata timeout
    (``HF_HUB_ETAG_TIMEOUT``)."""
    if config.get("offline") or env_offline():
        return []
    asking = [(key, spec) for key, spec in named_models(config) if _reads_hub(spec)]
    if not asking:
        return []
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import (
        HfHubHTTPError,
        HTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi()
    hub = f"the Hugging Face hub ({constants.ENDPOINT})"
    problems = []
    for position, (key, spec) in enumerate(asking):
        model_id, revision, _ = model_source(spec)
        try:
            api.model_info(model_id, revision=revision, timeout=constants.HF_HUB_ETAG_TIMEOUT)
        except RevisionNotFoundError:
            problems.append(f"{key}: {hub} has no revision {revision!r} of {model_id!r}")
        except HfHubHTTPError as answer:
            status = answer.response.status_code
            if isinstance(answer, RepositoryNotFoundError) or status == 404:
                problems.append(
                    f"{key}: {hub} has no model {model_id!r} (or gives no access to it "
                    "without a token); check the id, or give a local folder"
                )
            else:  # overloaded or down: every job that asks it would fail alike
                return problems + _unreachable(asking[position:], hub, f"answered {status}")
        except HTTPError as failure:  # no answer: refused, timed out, no such host
            why = f"cannot be reached ({type(failure).__name__}: {failure})"
            return problems + _unreachable(asking[position:], hub, why)
    return problems


def _reads_hub(spec: dict) -> bool:
    model_id, revision, _ = model_source(spec)
    return not (Path(model_id).is_dir() or _cached(model_id, revision))


def _unreachable(asking: list[tuple[str, dict]], hub: str, why: str) -> list[str]:
    return [
        f"{key}: {model_source(spec)[0]!r} needs {hub}, which {why}; {_offline_fix(spec)}"
        for key, spec in asking
    ]


def _offline_fix(spec: dict) -> str:
    copy = model_source(spec)[2]
    if copy is not None and _copy_folder(copy).is_dir():
        return f"its local_copy ({_copy_folder(copy)}) holds it: run with --config offline=true"
    return (
        "give a local folder as its id or a local_copy, or run once with the hub reachable "
        "to cache it"
    )
