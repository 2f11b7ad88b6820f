"""positionalize: position-controlled variants of a dataset (PosIR; rules/positionalize.smk),
each a length and a position of the relevant span, defined by the ``positionalize`` blocks."""

from irflow.data.tokens import tokenizer_source
from irflow.derived.positionalize import list_variants, seeded_variants
from irflow.workflow.kinds.base import DerivedKind
from irflow.workflow.local_files import local_folder_files, tokenizer_files


class Positionalize(DerivedKind):
    name = "positionalize"
    order = 1
    layout = "positional variants"

    def listed(self, config):
        return list_variants(config)

    def config_key(self, dataset, spec):
        return f"positionalize.{spec['block']}"

    def seeded(self):
        return seeded_variants(self.config)

    def tokenizer(self, wildcards):
        return tokenizer_source(self.spec(wildcards)["tokenizer"], self.config["models"])

    def inputs(self, wildcards):
        """The base dataset's tables, and a local tokenizer's files, so that editing them
        rebuilds the variant; with a screen, its reranker's local model files too (none
        otherwise, so that a variant without one keeps its inputs)."""
        spec = self.spec(wildcards)
        inputs = super().inputs(wildcards) | {
            "tokenizer": tokenizer_files(self.tokenizer(wildcards)),
        }
        if "screen" in spec:
            reranker = spec["screen"]["spec"]
            folder = reranker.get("id") or self.config["models"][reranker["model"]]["id"]
            inputs["screen_model"] = local_folder_files(folder)
        return inputs

    def env(self, wildcards):
        """A screen's reranker needs torch and sentence-transformers; plain variants do
        not."""
        screened = "screen" in self.spec(wildcards)
        return f"../envs/positionalize{'-screen' if screened else ''}.yaml"


KIND = Positionalize
