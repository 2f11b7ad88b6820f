"""generate: benchmarks written by a language model from a dataset's corpus (AIR-Bench;
rules/generate.smk), defined by the ``generate`` block."""

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

    def listed(self, config):
        return list_generated(config)

    def seeded(self):
        return seeded_generated(self.config)

    def tokenizer(self, wildcards):
        """The tokenizer that counts chunk_tokens, min_words and max_words (None: words)."""
        spec = self.spec(wildcards)
        return (
            tokenizer_source(spec["tokenizer"], self.config["models"])
            if spec["tokenizer"]
            else None
        )

    def inputs(self, wildcards):
        """The source dataset's corpus (and qrels when sampling its positives), the prompts
        file and a local tokenizer's files, so that editing any of them regenerates (the
        answer cache makes unchanged prompts free)."""
        spec = self.spec(wildcards)
        base = f"results/datasets/{spec['dataset']}"
        tokenizer = self.tokenizer(wildcards)
        inputs = {
            "base_source": f"{base}/source.json",
            "corpus": f"{base}/corpus.parquet",
            "prompts": self.plan.prompts_file(spec),
            "tokenizer": tokenizer_files(tokenizer) if tokenizer else [],
        }
        if spec["sample_from"] == "positives":
            inputs["qrels"] = f"{base}/qrels.parquet"
        return inputs

    def estimate_quality_control(self, wildcards):
        """The QC'd copies of the generated dataset whose judge the dry-run estimate
        counts."""
        return {
            name: spec
            for name, spec in self.plan.kinds["quality_control"].datasets.items()
            if spec["dataset"] == wildcards.dataset
        }

    def estimate_inputs(self, wildcards):
        """generate's inputs, and the judge's prompts when a QC'd copy is estimated too."""
        inputs = self.inputs(wildcards)
        if self.estimate_quality_control(wildcards):
            inputs["judge_prompts"] = self.plan.judge_prompts()
        return inputs


KIND = Generate
