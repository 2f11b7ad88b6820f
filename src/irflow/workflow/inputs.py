"""The input and params functions of the workflow's rules: each takes a job's wildcards and
names the files it reads or the settings that decide its outputs (so that a change to any of
them reruns just that job). Here: the rules that make and encode datasets; the runs' are in
irflow.workflow.run_inputs, whose ``Plan`` rules/common.smk builds from the validated config."""

import re
from pathlib import Path

from irflow.core.config import scored_split
from irflow.core.fingerprint import folder_md5
from irflow.data.filter import deciding_rules
from irflow.data.layouts import dataset_files, dataset_layout
from irflow.data.sources import concrete_source, source_type
from irflow.data.tokens import tokenizer_source
from irflow.encoding.models import result_settings
from irflow.encoding.onnx_export import EXPORT_SETTINGS
from irflow.workflow.local_files import local_folder_files
from irflow.workflow.model_check import read_folder
from irflow.workflow.plan import WorkflowNames
from irflow.workflow.snakemake_internals import ancient
from irflow.workflow.stamps import STAMPS, check_dataset_files


def one_of(names):
    """A wildcard constraint matching exactly these names (and nothing when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def texts_to_embed(dataset, model, side):
    if side == "passages":
        return f"results/datasets/{dataset}/passages/{model}.parquet"
    return f"results/datasets/{dataset}/filtered/{side}.parquet"


class DatasetInputs(WorkflowNames):
    """The input functions of the rules that make datasets and encode them; ``basedir`` is the
    Snakefile's folder, where the shipped prompts are found."""

    def __init__(self, config, basedir):
        super().__init__(config)
        self.basedir = Path(basedir)
        # The input files Snakemake recorded for the job that made an output, or None: the
        # Snakefile gives its own (irflow.workflow.snakemake_internals.recorded_inputs).
        self.recorded_inputs = lambda output: None

    # Datasets in.

    def local_files(self, wildcards):
        """The dataset's files when they are on disk, so that editing them reruns its
        downstream. Their checksum decides, not their modification times
        (irflow.workflow.stamps.check_dataset_files): an edit that keeps a file's time reruns,
        and the same files copied anew do not (they are marked ancient). A download job that
        ran before its files were on disk (it fetched them into the download cache) had none
        as inputs, as Snakemake recorded: it keeps none while their checksum is the one it
        recorded, rather than rerun the dataset once for the files it made itself."""
        config = self.config
        dataset = wildcards.dataset
        source = concrete_source(config, dataset)
        candidates = [Path(config["data_dir"]) / dataset] if config["data_dir"] else []
        candidates.append(Path(config["download_dir"]) / dataset)
        own = source_type(source["type"]).local_path(source)
        local = [own] if own else []
        candidates += [Path(path) for path in local]
        split = scored_split(config, dataset)
        for folder in candidates:
            if dataset_layout(folder, split):
                record = STAMPS / "download" / f"{dataset}.files.json"
                source_json = Path(f"results/datasets/{dataset}/source.json")
                files = [str(p) for p in dataset_files(folder, split)]
                if check_dataset_files(folder, split, source_json, record):
                    return files
                if self.recorded_inputs(str(source_json)) == []:
                    return []
                return [ancient(file) for file in files]
        return local

    def prompts_file(self, spec):
        """A relative prompts path is looked up in the working directory, then beside the
        Snakefile, so the shipped config/prompts are found from any working directory."""
        path = Path(spec["prompts"])
        if not path.is_absolute() and not path.exists():
            shipped = self.basedir / path
            if shipped.exists():
                return str(shipped)
        return str(path)

    def judge_prompts(self):
        """The quality-control judge's prompts file."""
        judge = self.config["quality_control"]["judge"]
        return self.prompts_file({"prompts": judge["prompts"]})

    def filter_inputs(self, wildcards):
        """The dataset's tables, and what its kind's filter job reads beyond them (a
        document-expanded copy: its base's filter outputs, irflow.workflow.kinds.expand)."""
        folder = f"results/datasets/{wildcards.dataset}"
        inputs = {"source": f"{folder}/source.json"} | {
            name: f"{folder}/{name}.parquet" for name in ("corpus", "queries", "qrels")
        }
        kind = self.derived.get(wildcards.dataset)
        return inputs | (kind.filter_inputs(wildcards.dataset) if kind else {})

    def filter_rules(self, wildcards):
        """The dataset's own filter block (a curated copy's), or the top-level one, without the
        settings of the filters that are off (irflow.data.filter.deciding_rules)."""
        kind = self.derived.get(wildcards.dataset)
        block = kind.filter_block(wildcards.dataset) if kind else None
        return deciding_rules(self.config["filter"] if block is None else block)

    # Encoding.

    def model_files(self, wildcards):
        """A model given as a local folder is an input, so editing its files reruns the jobs
        that read it (the ONNX export, whose params do not hold the files' MD5)."""
        return local_folder_files(self.config["models"][wildcards.model]["id"])

    def model_inputs(self, model):
        """A model given as a local folder: its files, as the inputs of the jobs whose params
        hold their MD5 (``model_result_settings``). A file added or removed changes the inputs
        and reruns them; an edit changes the MD5, which reruns them by their params and their
        settings stamp; so the files are marked ancient, and the same files copied anew (new
        modification times, same bytes) rerun nothing."""
        return [ancient(file) for file in local_folder_files(self.config["models"][model]["id"])]

    def model_result_settings(self, model):
        """The settings that determine a model's vectors; batch size and device are not
        among them. For a model read from a folder (its id, or offline its ``local_copy``), the
        MD5 of the folder's files too: a changed file makes other vectors, so its jobs rerun."""
        spec = self.config["models"][model]
        folder = read_folder(spec, self.config["offline"])
        if folder is None:
            return result_settings(spec)
        return result_settings(spec) | {"files_md5": folder_md5(folder)}

    def passages_tokenizer(self, wildcards):
        return tokenizer_source(wildcards.model, self.config["models"])

    def onnx_graph(self, wildcards):
        """The exported graph an embed job of this model runs on; none for backend
        torch."""
        backend = self.config["models"][wildcards.model]["backend"]
        if backend == "torch":
            return []
        return f"results/onnx/{wildcards.model}/{backend}/model.onnx"

    def onnx_export_settings(self, model, backend):
        spec = self.config["models"][model]
        return {
            "id": spec["id"],
            "revision": spec["revision"],
            "backend": backend,
            "export": EXPORT_SETTINGS[backend],
        }

    def document_embeddings(self, wildcards):
        """The embeddings a model's index is built from: of documents, or of their
        passages."""
        side = self.document_side(wildcards.model)
        return f"results/embeddings/{wildcards.dataset}/{wildcards.model}/{side}.parquet"

    def base_dataset(self, dataset):
        """The dataset a derived one is made from, where it reuses that one's vectors (its
        kind's ``reuses_vectors``; None for the others)."""
        kind = self.derived.get(dataset)
        return kind.base(dataset) if kind and kind.reuses_vectors else None

    def embed_inputs(self, dataset, model, sides):
        """The model and, per side embedded (texts, then query_texts for the queries
        embedded with the documents), the texts; for a dataset made from another (a
        variant, a curated, generated or quality-controlled one), that dataset's texts and
        embeddings, whose vectors it reuses for unchanged rows."""
        inputs = {
            "source": f"results/datasets/{dataset}/source.json",
            "model": self.model_inputs(model),
        }
        base = self.base_dataset(dataset)
        for prefix, side in zip(("", "query_"), sides):
            inputs[f"{prefix}texts"] = texts_to_embed(dataset, model, side)
            if base:
                inputs[f"reuse_{prefix}texts"] = texts_to_embed(base, model, side)
                inputs[f"reuse_{prefix}embeddings"] = (
                    f"results/embeddings/{base}/{model}/{side}.parquet"
                )
        return inputs

    def document_and_query_inputs(self, wildcards):
        """A model embeds a dataset's documents (or passages) and queries in one job: it is
        loaded once, and nothing changes one side without the other."""
        side = self.document_side(wildcards.model)
        return self.embed_inputs(wildcards.dataset, wildcards.model, [side, "queries"])

    def shard_inputs(self, wildcards):
        return self.embed_inputs(wildcards.dataset, wildcards.model, [wildcards.side])

    def query_inputs(self, wildcards):
        return self.embed_inputs(wildcards.dataset, wildcards.model, ["queries"])

    def shard_names(self, dataset):
        """The names of a dataset's document shards: ``<shard>-of-<count>``."""
        count = self.embed_shards(dataset)
        return [f"{shard}-of-{count}" for shard in range(count)]

    def gather_inputs(self, wildcards):
        folder = f"{wildcards.dataset}/{wildcards.model}/{wildcards.side}.shards"
        names = self.shard_names(wildcards.dataset)
        return {
            "source": f"results/datasets/{wildcards.dataset}/source.json",
            "texts": texts_to_embed(wildcards.dataset, wildcards.model, wildcards.side),
            "shards": [f"results/embeddings/{folder}/{name}.parquet" for name in names],
            "manifests": [f"results/manifests/embed/{folder}/{name}.json" for name in names],
        }

    def vector_inputs(self, wildcards, sides):
        """The model's files and, per side encoded (texts, then query_texts), the texts."""
        inputs = {
            "source": f"results/datasets/{wildcards.dataset}/source.json",
            "model": self.model_inputs(wildcards.model),
        }
        for prefix, side in zip(("", "query_"), sides):
            inputs[f"{prefix}texts"] = texts_to_embed(wildcards.dataset, wildcards.model, side)
        return inputs

    def vector_gather_inputs(self, wildcards):
        folder = f"{wildcards.family}/{wildcards.dataset}/{wildcards.model}/corpus.shards"
        names = self.shard_names(wildcards.dataset)
        return {
            "source": f"results/datasets/{wildcards.dataset}/source.json",
            "texts": texts_to_embed(wildcards.dataset, wildcards.model, "corpus"),
            "shards": [f"results/{folder}/{name}.parquet" for name in names],
            "manifests": [f"results/manifests/{folder}/{name}.json" for name in names],
        }
