"""The input and params functions of the workflow's rules: each takes a job's wildcards and
names the files it reads or the settings that decide its outputs (so that a change to any of
them reruns just that job). Here: the rules that make and encode datasets; the runs' are in
irflow.workflow.run_inputs, whose ``Plan`` rules/common.smk builds from the validated config."""

import functools
import re
from pathlib import Path

from irflow.core.config import scored_split
from irflow.core.fingerprint import folder_md5
from irflow.data.download import dataset_files, dataset_layout
from irflow.data.filter import deciding_rules
from irflow.data.sources import concrete_source
from irflow.data.tokens import tokenizer_source
from irflow.derived.llm.client import answer_settings
from irflow.encoding.models import result_settings
from irflow.encoding.onnx_export import EXPORT_SETTINGS
from irflow.workflow.model_check import read_folder
from irflow.workflow.plan import WorkflowNames
from irflow.workflow.stamps import STAMPS, check_dataset_files

# The files a Hugging Face tokenizer is read from (not the weights beside them in a model's
# folder, so that replacing those does not rebuild what only the tokenizer decides).
TOKENIZER_FILES = re.compile(r"(.*token.*|vocab.*|merges\.txt|.*\.model|config\.json)")


def one_of(names):
    """A wildcard constraint matching exactly these names (and nothing when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


# A model folder's files, hashed once per workflow (not per job).
files_md5 = functools.cache(folder_md5)


@functools.cache
def local_folder_files(folder):
    """Every file under a local folder, listed once per workflow (not per job); none for a
    Hugging Face id."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.rglob("*") if p.is_file())


def tokenizer_files(source):
    """A local tokenizer's files, as inputs; none for a Hugging Face id."""
    folder = Path(source["id"])
    if not folder.is_dir():
        return []
    return sorted(
        str(p) for p in folder.iterdir() if p.is_file() and TOKENIZER_FILES.fullmatch(p.name)
    )


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

    # Datasets in.

    def local_files(self, wildcards):
        """The dataset's files when they are on disk, so that editing them reruns its
        downstream; checked against their checksum when their status changed
        (irflow.workflow.stamps), so that an edit that keeps their modification times does
        too."""
        config = self.config
        dataset = wildcards.dataset
        source = concrete_source(config, dataset)
        candidates = [Path(config["data_dir"]) / dataset] if config["data_dir"] else []
        candidates.append(Path(config["download_dir"]) / dataset)
        local = [source["path"]] if source["type"] == "path" else []
        candidates += [Path(path) for path in local]
        split = scored_split(config, dataset)
        for folder in candidates:
            if dataset_layout(folder, split):
                record = STAMPS / "download" / f"{dataset}.files.json"
                source_json = Path(f"results/datasets/{dataset}/source.json")
                check_dataset_files(folder, split, source_json, record)
                return [str(p) for p in dataset_files(folder, split)]
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

    def variant_tokenizer(self, wildcards):
        return tokenizer_source(
            self.variants[wildcards.dataset]["tokenizer"], self.config["models"]
        )

    def positionalize_inputs(self, wildcards):
        """The base dataset's tables, and a local tokenizer's files, so that editing them
        rebuilds the variant; with a screen, its reranker's local model files too (none
        otherwise, so that a variant without one keeps its inputs)."""
        spec = self.variants[wildcards.dataset]
        base = f"results/datasets/{spec['dataset']}"
        inputs = {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "queries": f"{base}/queries.parquet",
            "qrels": f"{base}/qrels.parquet",
            "tokenizer": tokenizer_files(self.variant_tokenizer(wildcards)),
        }
        if "screen" in spec:
            reranker = spec["screen"]["spec"]
            folder = reranker.get("id") or self.config["models"][reranker["model"]]["id"]
            inputs["screen_model"] = local_folder_files(folder)
        return inputs

    def positionalize_env(self, wildcards):
        """A screen's reranker needs torch and sentence-transformers; plain variants do
        not."""
        screened = "screen" in self.variants[wildcards.dataset]
        return f"../envs/positionalize{'-screen' if screened else ''}.yaml"

    def generate_inputs(self, wildcards):
        """The source dataset's corpus (and qrels when sampling its positives), the prompts
        file and a local tokenizer's files (it counts chunk_tokens, min_words and
        max_words), so that editing any of them regenerates (the answer cache makes
        unchanged prompts free)."""
        spec = self.generated[wildcards.dataset]
        base = f"results/datasets/{spec['dataset']}"
        tokenizer = (
            tokenizer_files(tokenizer_source(spec["tokenizer"], self.config["models"]))
            if spec["tokenizer"]
            else []
        )
        inputs = {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "prompts": self.prompts_file(spec),
            "tokenizer": tokenizer,
        }
        if spec["sample_from"] == "positives":
            inputs["qrels"] = f"{base}/qrels.parquet"
        return inputs

    def judge_prompts(self):
        """The quality-control judge's prompts file."""
        judge = self.config["quality_control"]["judge"]
        return self.prompts_file({"prompts": judge["prompts"]})

    def estimate_quality_control(self, wildcards):
        """The QC'd copies of the generated dataset whose judge the dry-run estimate
        counts."""
        return {
            name: spec
            for name, spec in self.quality_controlled.items()
            if spec["dataset"] == wildcards.dataset
        }

    def generate_estimate_inputs(self, wildcards):
        """generate's inputs, and the judge's prompts when a QC'd copy is estimated too."""
        inputs = self.generate_inputs(wildcards)
        if self.estimate_quality_control(wildcards):
            inputs["judge_prompts"] = self.judge_prompts()
        return inputs

    def filter_inputs(self, wildcards):
        """The dataset's tables; for a document-expanded copy (expand) also its base's
        filter outputs, whose documents it keeps (irflow.data.filter.run_filter_as_base),
        so that the copy ranks the same corpus as its base."""
        folder = f"results/datasets/{wildcards.dataset}"
        inputs = {"source": f"{folder}/source.json"} | {
            name: f"{folder}/{name}.parquet" for name in ("corpus", "queries", "qrels")
        }
        if wildcards.dataset in self.expanded:
            base = f"results/datasets/{self.expanded[wildcards.dataset]}/filtered"
            tables = ("corpus", "audit", "clusters")
            inputs |= {f"base_{name}": f"{base}/{name}.parquet" for name in tables}
        return inputs

    def filter_rules(self, wildcards):
        """A curated dataset's own filter block, or the top-level one, without the settings of
        the filters that are off (irflow.data.filter.deciding_rules)."""
        if wildcards.dataset in self.curated:
            return deciding_rules(self.config["curate"][wildcards.dataset]["filter"])
        return deciding_rules(self.config["filter"])

    def expand_inputs(self, wildcards):
        """The base dataset's tables, and the local files of the query model and of the
        filter's cross-encoder, so that editing them rebuilds."""
        spec = self.config["expand"][wildcards.dataset]
        base = f"results/datasets/{spec['dataset']}"
        filter_spec = spec.get("filter")
        rerankers = self.config["rerankers"]
        return {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "queries": f"{base}/queries.parquet",
            "qrels": f"{base}/qrels.parquet",
            "model": local_folder_files(spec["model"]["id"]) if "model" in spec else [],
            "filter_model": (
                local_folder_files(rerankers[filter_spec["reranker"]]["id"]) if filter_spec else []
            ),
        }

    def expand_settings(self, wildcards):
        """The expand block, with the filter's cross-encoder and the llm settings that
        change the answers: a change to any of them rebuilds the copy."""
        spec = self.config["expand"][wildcards.dataset]
        settings = {"expand": spec}
        if "filter" in spec:
            settings["filter_model"] = self.config["rerankers"][spec["filter"]["reranker"]]
        if "llm" in spec:
            settings["llm"] = answer_settings(self.config["llm"])
        return settings

    # Encoding.

    def model_files(self, wildcards):
        """A model given as a local folder is an input, so editing its files re-embeds."""
        return local_folder_files(self.config["models"][wildcards.model]["id"])

    def model_result_settings(self, model):
        """The settings that determine a model's vectors; batch size and device are not
        among them. For a model read from a folder (its id, or offline its ``local_copy``), the
        MD5 of the folder's files too: a changed file makes other vectors, so its jobs rerun."""
        spec = self.config["models"][model]
        folder = read_folder(spec, self.config["offline"])
        if folder is None:
            return result_settings(spec)
        return result_settings(spec) | {"files_md5": files_md5(str(folder))}

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
        """The dataset a variant, curated, generated or quality-controlled one is made from
        (None for the others)."""
        if dataset in self.variants:
            return self.variants[dataset]["dataset"]
        return (
            self.curated.get(dataset)
            or self.generated.get(dataset, {}).get("dataset")
            or self.quality_controlled.get(dataset, {}).get("dataset")
        )

    def embed_inputs(self, dataset, model, sides):
        """The model and, per side embedded (texts, then query_texts for the queries
        embedded with the documents), the texts; for a dataset made from another (a
        variant, a curated, generated or quality-controlled one), that dataset's texts and
        embeddings, whose vectors it reuses for unchanged rows."""
        inputs = {
            "source": f"results/datasets/{dataset}/source.json",
            "model": local_folder_files(self.config["models"][model]["id"]),
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
            "model": local_folder_files(self.config["models"][wildcards.model]["id"]),
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
