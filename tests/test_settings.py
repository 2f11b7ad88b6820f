"""Typed settings: the config's blocks as the frozen models that datamodel-codegen generates from
config/config.schema.yaml (irflow.core.settings_types), so that the schema stays their one
source."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SCHEMA, index_spec, validated
from pydantic import ValidationError

from irflow.core.config import schema_defaults
from irflow.core.settings_types import Index, Negatives
from irflow.core.settings_types import LateInteractionVoyager as Voyager

GENERATED = REPO / "src" / "irflow" / "core" / "settings_types.py"


def codegen() -> str:
    """The generator of the test environment (pyproject.toml's test extra pins its version)."""
    found = Path(sys.executable).with_name("datamodel-codegen")
    return str(found) if found.exists() else shutil.which("datamodel-codegen")


def generate(tmp_path: Path, *options: str) -> Path:
    """The module the generator writes with pyproject.toml's [tool.datamodel-codegen]. Its
    formatter reads the line length from the pyproject.toml beside the output: a copy."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    out = tmp_path / "settings_types.py"
    subprocess.run([codegen(), *options, "--output", str(out)], cwd=REPO, check=True)
    return out


def test_the_committed_types_are_the_generators_output_of_the_schema(tmp_path):
    """A schema edited without running `datamodel-codegen` (in the repository's root) fails."""
    assert generate(tmp_path).read_text(encoding="utf-8") == GENERATED.read_text(
        encoding="utf-8"
    ), (
        "src/irflow/core/settings_types.py is not the schema's: run `datamodel-codegen` in the "
        "repository's root"
    )


def test_a_changed_schema_default_changes_the_generated_types(tmp_path):
    """The comparison above can fail: a new default in the schema is a new default in the
    generated module."""
    schema = yaml.safe_load((REPO / "config" / "config.schema.yaml").read_text())
    schema["$defs"]["index"]["properties"]["nprobe"]["default"] = 77
    edited = tmp_path / "config.schema.yaml"
    edited.write_text(yaml.safe_dump(schema, sort_keys=False))
    module = generate(tmp_path, "--input", str(edited))
    assert module.read_text(encoding="utf-8") != GENERATED.read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location("edited_settings_types", module)
    edited_types = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = edited_types  # pydantic resolves the annotations in it
    try:
        spec.loader.exec_module(edited_types)
        assert edited_types.Index.model_validate({"type": "ivf"}).nprobe == 77
    finally:
        del sys.modules[spec.name]
    assert Index.model_validate({"type": "ivf"}).nprobe == 32


def test_a_typed_block_holds_the_schemas_defaults_and_is_frozen():
    typed = Index.model_validate({"type": "ivfpq"})
    # The defaults are those the validated config holds (irflow.core.config fills them in).
    assert typed.model_dump(by_alias=True) == index_spec(type="ivfpq")
    assert (typed.nprobe, typed.pq_bits, typed.refine, typed.nlist) == (32, 8, True, None)
    with pytest.raises(ValidationError):
        typed.nprobe = 64
    with pytest.raises(ValidationError, match="nprob"):
        Index.model_validate({"type": "ivf", "nprob": 8})  # a key the schema does not have
    with pytest.raises(ValidationError):
        Index.model_validate({"type": "ivf", "nprobe": 0})  # the schema's minimum is 1
    # A method's own setting, and the defaults of the block it is in.
    export = Negatives.model_validate({"dataset": "d", "system": "bm25"})
    assert export.false_negative_filter.method == "relative_to_positive"
    assert export.false_negative_filter.ratio == 0.95
    assert (export.top_k, export.split, export.consistency) == (100, "train", None)


def reads_as(typed: dict, filled: dict, where: str) -> None:
    """``typed`` (a model's dump) holds every value of ``filled`` (the block with the schema's
    defaults filled in, as the validated config holds it), and None for every key it lacks (a
    key without a default, left unset)."""
    for key, value in typed.items():
        if key not in filled:
            assert value is None, (where, key, value)
        elif isinstance(value, dict) and isinstance(filled[key], dict):
            reads_as(value, filled[key], f"{where}.{key}")
        else:
            assert value == filled[key], (where, key, value, filled[key])
    assert set(filled) <= set(typed), (where, set(filled) - set(typed))


def test_the_typed_blocks_of_the_stages_read_what_the_validated_config_holds():
    """Each index and negatives block of the shipped configs, one of every index type and
    false-negative filter, and a voyager index: typed, it reads the values the validated config
    holds (the schema's defaults filled in as irflow.core.config fills them)."""
    blocks = [("index", {"type": kind}) for kind in ("flat", "hnsw", "ivf", "ivfpq")]
    methods = [{"method": "none"}, {"method": "absolute", "max_score": 9}]
    blocks += [
        ("negatives", {"dataset": "d", "system": "s", "false_negative_filter": method})
        for method in methods
    ]
    blocks += [("negatives", {"dataset": "d", "system": "s", "consistency": {"vectors": "v"}})]
    blocks += [("late_interaction_voyager", {"type": "voyager", "k_token": 50})]
    paths = sorted([*REPO.glob("config/*.yaml"), *REPO.glob("config/reproduce/*.yaml")])
    for path in paths:
        if path.name == "config.schema.yaml":
            continue
        config = yaml.safe_load(path.read_text())
        blocks += [("index", block) for block in config.get("indexes", {}).values()]
        blocks += [("negatives", block) for block in config.get("negatives", {}).values()]
    models = {"index": Index, "negatives": Negatives, "late_interaction_voyager": Voyager}
    assert sum(1 for definition, _ in blocks if definition == "negatives") >= 4
    for definition, block in blocks:
        filled = schema_defaults(SCHEMA, definition, block)
        typed = models[definition].model_validate(block).model_dump(by_alias=True)
        reads_as(typed, filled, f"{definition} {block}")


def test_the_typed_data_and_analysis_blocks_hold_the_validated_configs_defaults():
    """The blocks the filter, download and analysis stages type (a filter with every quality
    filter and near-duplicates on, each built-in source type, the position analysis with its
    bootstrap and saliency, the correlation and BEIR's figures): typed, each left as the user
    wrote it, they read the values the validated config holds, so a stage that types its block
    computes what it computed from the dict."""
    from irflow.core import settings_types
    from irflow.data.quality import FILTERS

    every_filter = {name: {"enabled": True} for name in FILTERS}
    blocks = [
        ("filter", {}),
        ("filter", {"quality": every_filter, "near_duplicates": {"enabled": True}}),
        ("source_url", {"type": "url", "url": "https://example.org/z.zip"}),
        ("source_huggingface", {"type": "huggingface", "repo": "BeIR/scifact"}),
        ("source_path", {"type": "path", "path": "data/mine"}),
        ("source_ir_datasets", {"type": "ir_datasets", "id": "beir/scifact"}),
        ("source_beir", {"type": "beir", "name": "scifact"}),
    ]
    models = {"filter": settings_types.Filter, "source_url": settings_types.SourceUrl}
    models |= {"source_huggingface": settings_types.SourceHuggingface}
    models |= {"source_path": settings_types.SourcePath, "source_beir": settings_types.SourceBeir}
    models |= {"source_ir_datasets": settings_types.SourceIrDatasets}
    for definition, block in blocks:
        filled = schema_defaults(SCHEMA, definition, block)
        typed = models[definition].model_validate(block).model_dump(by_alias=True)
        reads_as(typed, filled, f"{definition} {block}")
    config = validated(position_analysis={"bootstrap": {"resamples": 10}})
    for key, model in (
        ("position_analysis", settings_types.PositionAnalysis),
        ("correlation", settings_types.Correlation),
        ("beir_figures", settings_types.BeirFigures),
        ("cost", settings_types.Cost),
    ):
        given = {"bootstrap": {"resamples": 10}} if key == "position_analysis" else {}
        reads_as(model.model_validate(given).model_dump(by_alias=True), config[key], key)
