"""Validate the workflow configuration against config/config.schema.yaml.

Errors name the offending key as a dotted path and what may be written there (irflow.
config_schema), so a typo in a 200-line config is found at once.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path

import jsonschema
import yaml
from huggingface_hub.utils import HFValidationError, validate_repo_id

from irflow.core.config_schema import describe, read_text_values, resolve
from irflow.core.errors import ConfigError

# How a model id that is meant as a folder starts; a hub id is ``name`` or ``org/name``.
PATH_PREFIXES = ("/", "./", "../", "~")
# The checks features add to every validation (``register_check``), by module and name: the
# order the features were imported in does not change the order of the problems.
CHECKS: dict[str, Callable[[dict], list[str]]] = {}
# The names of the derived datasets a config defines, of every kind: the registry of kinds
# (irflow.workflow.kinds) adds its listing here, as the features add their checks.
DERIVED_DATASETS: list[Callable[[dict], list[str]]] = []


def register_check(check: Callable[[dict], list[str]]) -> Callable[[dict], list[str]]:
    """Add ``check`` (the config, defaults filled in -> its problems, each naming its config
    key) to every ``validate_config``; a decorator. A feature registers the checks of its own
    blocks when its module is imported, so this module imports no feature: whatever validates
    imports the features first (irflow.workflow.config imports them all)."""
    CHECKS[f"{check.__module__}.{check.__qualname__}"] = check
    return check


# PyYAML's libyaml parser where it was built with it: the schema is 70 kB, read by every dry
# run, and the pure-Python parser took 0.09 s of it (the C one 0.01 s, the same dict).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_schema(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=SAFE_LOADER)


def _fill_defaults(instance, schema: dict, root: dict):
    """Insert schema defaults for missing object properties, recursively."""
    schema = resolve(schema, root)
    if isinstance(instance, dict):
        for key, subschema in schema.get("properties", {}).items():
            subschema = resolve(subschema, root)
            if key not in instance and "default" in subschema:
                instance[key] = copy.deepcopy(subschema["default"])
            if key in instance:
                _fill_defaults(instance[key], subschema, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in instance.items():
                if key not in schema.get("properties", {}):
                    _fill_defaults(value, extra, root)
    for alternative in schema.get("oneOf", []):
        resolved = resolve(alternative, root)
        if jsonschema.Draft202012Validator(resolved | {"$defs": root["$defs"]}).is_valid(instance):
            _fill_defaults(instance, resolved, root)
            break
    if isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for item in instance:
            _fill_defaults(item, schema["items"], root)


def schema_defaults(schema: dict, definition: str, entry: dict) -> dict:
    """``entry``, an instance of the schema's ``$defs[definition]``, with the defaults the
    schema gives filled in: ``{"type": "bm25"}`` becomes the BM25 a config gets by naming only
    its type."""
    filled = copy.deepcopy(entry)
    _fill_defaults(filled, schema["$defs"][definition], schema)
    return filled


def validate_config(config: dict, schema: dict) -> dict:
    """Return ``config`` with defaults filled in and command-line text read as the values the
    schema takes, or raise ConfigError listing every problem."""
    config = read_text_values(copy.deepcopy(config), schema, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    problems = [line for error in errors for line in describe(error, schema)]
    if not problems:
        _fill_defaults(config, schema, schema)
        problems = _cross_references(config)
        problems += [problem for _, check in sorted(CHECKS.items()) for problem in check(config)]
        problems += _model_id_problems(config)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    return config


def scored_split(config: dict, dataset: str) -> str:
    """The qrels split scored for a dataset of the config: its own ``split`` (MS MARCO's dev,
    as BEIR scores it), else the top-level one (a dataset made from another included)."""
    return config["datasets"].get(dataset, {}).get("split") or config["split"]


def reranked_name(first_stage: str, reranker: str, k: int) -> str:
    return f"{first_stage}+{reranker}@{k}"


def system_kinds(config: dict) -> dict[str, str]:
    """Every system the config defines, by name: bm25, dense, fusion or rerank."""
    kinds = {name: spec["type"] for name, spec in config["retrievers"].items()}
    kinds |= {name: "fusion" for name in config["fusion"]}
    for item in config["reranking"]:
        for k in item["k"]:
            kinds[reranked_name(item["first_stage"], item["reranker"], k)] = "rerank"
    return kinds


def missing_key(path: str, value: str, table: str, known) -> str:
    allowed = ", ".join(sorted(known)) or "none defined"
    return f"config key '{path}': {value!r} is not a key of '{table}'; allowed values: {allowed}"


def _cross_references(config: dict) -> list[str]:
    # Each retriever's own references are its family's check (irflow.workflow.families), each
    # reranker's its type's (irflow.retrieval.rerankers).
    problems = []
    for name, model in config["models"].items():
        passages = model["long_documents"]
        if passages["overlap"] >= passages["passage_tokens"]:
            problems.append(
                f"config key 'models.{name}.long_documents.overlap': {passages['overlap']} must "
                f"be less than passage_tokens ({passages['passage_tokens']})"
            )
    first_stages = set(config["retrievers"]) | set(config["fusion"])
    for i, item in enumerate(config["reranking"]):
        if item["first_stage"] not in first_stages:
            path = f"reranking.{i}.first_stage"
            problems.append(missing_key(path, item["first_stage"], "retrievers", first_stages))
        if item["reranker"] not in config["rerankers"]:
            path = f"reranking.{i}.reranker"
            problems.append(missing_key(path, item["reranker"], "rerankers", config["rerankers"]))
    return problems


def torch_problems(config: dict, key: str, model: str) -> list[str]:
    """The problem of ``model`` (named at config key ``key``) for a stage that runs on torch:
    an ONNX backend."""
    backend = config["models"].get(model, {}).get("backend", "torch")
    if backend == "torch":
        return []
    return [
        f"config key '{key}': model {model!r} has backend {backend!r}; this stage runs "
        "the model on torch: name a model with backend torch"
    ]


def derived_dataset_problems(config: dict, block: str) -> list[str]:
    """Each dataset a block derives: a known base dataset. (That its name is new is checked
    for every kind at once: irflow.workflow.kinds.)"""
    problems = []
    for name, spec in config[block].items():
        if spec["dataset"] not in config["datasets"]:
            path = f"{block}.{name}.dataset"
            problems.append(missing_key(path, spec["dataset"], "datasets", config["datasets"]))
    return problems


def all_datasets(config: dict) -> set[str]:
    """The config's own datasets and every derived one, of every kind (``DERIVED_DATASETS``):
    what a block that reads any dataset (``negatives``) may name."""
    names = set(config["datasets"])
    for listed in DERIVED_DATASETS:
        names |= set(listed(config))
    return names


def _model_ids(config: dict) -> list[tuple[str, dict]]:
    """(dotted key, holder) of each model id: models and cross-encoder rerankers."""
    # Called before schema validation too (by expand_config), so any shape must be survived.
    return [
        (f"{table}.{name}.id", spec)
        for table in ("models", "rerankers")
        if isinstance(config.get(table), dict)
        for name, spec in config[table].items()
        if isinstance(spec, dict) and isinstance(spec.get("id"), str)
    ]


def _model_id_problems(config: dict) -> list[str]:
    """A model id must be an existing folder or a valid Hugging Face id, so that a mistyped
    path fails now rather than minutes later inside huggingface_hub."""
    problems = []
    for key, spec in _model_ids(config):
        model_id = spec["id"]
        if model_id and Path(model_id).is_dir():  # Path("") is the working directory
            continue
        try:
            validate_repo_id(model_id)
        except HFValidationError as error:
            if model_id.startswith(PATH_PREFIXES) or model_id.count("/") > 1:
                folder = Path(model_id)
                where = "" if folder.is_absolute() else f" (looked for {folder.absolute()})"
                problems.append(
                    f"config key '{key}': the folder {model_id!r} does not exist{where}"
                )
            else:
                problems.append(
                    f"config key '{key}': {model_id!r} is neither an existing folder nor a "
                    f"valid Hugging Face id: {error}"
                )
    return problems


def expand_config(config: dict) -> dict:
    """Expand $VARIABLES and a leading ``~`` in paths (model and cross-encoder ids, data and
    download dirs) so one config file serves machines whose models and data live in different
    places."""
    config = copy.deepcopy(config)
    places = [(key, config) for key in ("data_dir", "download_dir")] + _model_ids(config)
    for dotted_key, holder in places:
        key = dotted_key.rsplit(".", 1)[-1]
        value = holder.get(key)
        if isinstance(value, str):
            expanded = os.path.expandvars(value)
            if "$" in expanded:
                raise ConfigError(
                    f"config key '{dotted_key}': {value!r} names an environment variable that "
                    "is not set"
                )
            # Neither sentence-transformers nor huggingface_hub expands "~" in a model id.
            holder[key] = os.path.expanduser(expanded)
    return config
