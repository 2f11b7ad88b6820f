"""generate: benchmarks written by a language model from a dataset's corpus (AIR-Bench;
rules/generate.smk), defined by the ``generate`` block."""

from irflow.core import settings_types
from irflow.data.tokens import tokenizer_source
from irflow.derived.generate.dataset import list_generated, seeded_generated
from irflow.workflow.kinds.base import DerivedKind
from irflow.workflow.local_files import tokenizer_files


class Generate(DerivedKind):
    name = "generate"
    order = 2
    layout = "generated benchmarks"
    generated = True
    compared = True
    settings_type = settings_types.Generate

    def listed(self, config):
        return list_generated(config)

    def seeded(self):
        return seeded_generated(self.config)

    def tokenizer(self, wildcards):
        """The tokenizer that counts chunk_tokens, min_words and max_words (None: words)."""
        tokenizer = self.typed[wildcards.dataset].tokenizer
        return tokenizer_source(tokenizer, self.config["models"]) if tokenizer else None

    def inputs(self, wildcards):
        """The source dataset's corpus (and qrels when sampling its positives), the prompts
        file and a local tokenizer's files, so that editing any of them regenerates (the
        answer cache makes unchanged prompts free)."""
        generate = self.typed[wildcards.dataset]
        base = f"results/datasets/{generate.dataset}"
        tokenizer = self.tokenizer(wildcards)
        inputs = {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "prompts": self.plan.prompts_file(self.spec(wildcards)),
            "tokenizer": tokenizer_files(tokenizer) if tokenizer else [],
        }
        if generate.sample_from == "positives":
            inputs["qrels"] = f"{base}/qrels.parquet"
        return inputs

    def estimate_quality_control(self, wildcards):
        """The QC'd copies of the generated dataset whose judge the dry-run estimate
        counts (their settings as the config writes them: the estimate job's params)."""
        quality_control = self.plan.kinds["quality_control"]
        return {
            name: spec
            for name, spec in quality_control.datasets.items()
            if quality_control.typed[name].dataset == wildcards.dataset
        }

    def estimate_inputs(self, wildcards):
        """generate's inputs, and the judge's prompts when a QC'd copy is estimated too."""
        inputs = self.inputs(wildcards)
        if self.estimate_quality_control(wildcards):
            inputs["judge_prompts"] = self.plan.judge_prompts()
        return inputs


KIND = Generate
