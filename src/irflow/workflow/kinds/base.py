"""base: what the workflow knows of a kind of derived dataset, the protocol each kind
implements.

A derived dataset is a dataset made from another, the config's own or derived (a positional
variant, a generated benchmark, a curated, quality-controlled or document-expanded copy): an
ordinary dataset under results/datasets/<name>/ that filter, embed, retrieve and score read like
any other. Its kind's one module under irflow.workflow.kinds says everything the plan needs:
the datasets its config block defines, the files and settings of the job that makes each, and
how the results tables show them. The job's rules (rules/<stage>.smk) read it as
``plan.kinds[<name>]``; a kind that makes its datasets from its base's tables in Python
(``derive``) needs no rules of its own: the shared rule ``derive`` (rules/derive.smk) runs its
``make``.
"""

from __future__ import annotations

from functools import cache

from pydantic import TypeAdapter

# A generated dataset's block (generated query ids never name a document: nothing to remove,
# no unknown qrels).
GENERATED_SPEC = {"remove_self_matches": False, "unknown_qrels": "keep", "embed_shards": 1}


class DerivedKind:
    """One kind, made for a plan (``plan``, irflow.workflow.run_inputs.Plan): its datasets
    (``datasets``: by name, each with its settings, its base's name as ``dataset``)."""

    # Its config block, and its job's stage (results/manifests/<name>/<dataset>.json).
    name: str
    # Where its datasets come in the list of datasets, after the config's own: a kind made
    # from another kind's datasets comes after it. The order every job that lists datasets
    # reads (a change of it reruns them).
    order: int
    # Its datasets in the results tables, in words (irflow.evaluation.tables).
    layout: str
    # The dataset block its datasets are embedded and searched with: their base's, or
    # GENERATED_SPEC for datasets of new queries.
    generated = False
    # Its datasets reuse their base's vectors for unchanged texts (irflow.encoding.embed).
    reuses_vectors = True
    # The correlate stage compares the system orderings on its datasets with the others'.
    compared = False
    # Its datasets are made by its ``make``, in the shared rule ``derive`` (rules/derive.smk),
    # whose stage its jobs' manifests are of; else by rules of its own, of its stage.
    derive = False
    # The generated type (irflow.core.settings_types) of one of its datasets' settings, which
    # ``typed`` holds; None where the kind makes them rather than the config writing them (a
    # positional variant's).
    settings_type: object = None

    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.datasets = self.listed(plan.config)
        # Each dataset's settings typed once, which the planning reads; ``datasets`` keeps the
        # config's dicts, which its jobs' params are (a typed value written back would change
        # a param's text, and rerun the job).
        self.typed = (
            {}
            if self.settings_type is None
            else {
                name: adapter(self.settings_type).validate_python(spec)
                for name, spec in self.datasets.items()
            }
        )

    def listed(self, config: dict) -> dict[str, dict]:
        """The datasets its block defines, by name, each with its settings (``dataset``: its
        base)."""
        return {name: dict(spec) for name, spec in sorted(config[self.name].items())}

    def config_key(self, dataset: str, spec: dict) -> str:
        """The config key that defines ``dataset`` (one of ``listed``), as errors name it."""
        return f"{self.name}.{dataset}"

    def seeded(self) -> dict[str, dict[str, int]]:
        """Per dataset of its first seed, that dataset under each seed its block names
        (irflow.core.seeds); none for a kind that samples nothing."""
        return {}

    def base(self, dataset: str) -> str:
        """The dataset ``dataset`` is made from."""
        return self.datasets[dataset]["dataset"]

    def spec(self, wildcards) -> dict:
        """The settings of the dataset a job makes."""
        return self.datasets[wildcards.dataset]

    def dataset_spec(self, dataset: str) -> dict:
        """The dataset block ``dataset`` is embedded and searched with."""
        if self.generated:
            return dict(GENERATED_SPEC)
        return self.config["datasets"][self.base(dataset)]

    def inputs(self, wildcards) -> dict:
        """What the job that makes a dataset reads: its base's tables and source.json."""
        base = f"results/datasets/{self.base(wildcards.dataset)}"
        tables = {name: f"{base}/{name}.parquet" for name in ("corpus", "queries", "qrels")}
        return {"base_source": f"{base}/source.json"} | tables

    @staticmethod
    def make(tables, spec: dict) -> tuple[object, dict]:
        """A dataset of settings ``spec`` made from its base's ``tables`` (``corpus``,
        ``queries`` and ``qrels``, the contracts' frames), for a kind that ``derive``s: its
        tables (attributes of those names) and its statistics (stats.json)."""
        raise NotImplementedError

    def manifests(self) -> list[str]:
        """The manifests of its jobs."""
        stage = "derive" if self.derive else self.name
        return [f"results/manifests/{stage}/{d}.json" for d in self.datasets]

    def filter_inputs(self, dataset: str) -> dict:
        """What the filter job of ``dataset`` reads beyond its own tables."""
        return {}

    def filter_block(self, dataset: str) -> dict | None:
        """The filter block ``dataset`` is filtered with (None: the top-level one)."""
        return None

    def views(self) -> dict[str, list[str]]:
        """The results database's views of its own tables, by view (none when it has no
        datasets)."""
        return {}


@cache
def adapter(settings_type) -> TypeAdapter:
    """pydantic's validator of ``settings_type`` (a model, or a union of models), made once."""
    return TypeAdapter(settings_type)
