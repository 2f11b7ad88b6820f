"""config: the workflow's whole configuration check.

irflow.core.config validates against config/config.schema.yaml and checks the cross-references
of the core blocks; each feature registers the checks of its own blocks
(``irflow.core.config.register_check``) when its module is imported. This module imports every
feature that registers one, so that validating through it runs them all: the Snakefile, the
tests and the benchmarks validate here.
"""

# Each import registers that feature's checks.
import irflow.analyses.saliency
import irflow.derived.expand
import irflow.derived.generate.dataset
import irflow.derived.llm.client
import irflow.derived.negatives
import irflow.derived.qc.settings
import irflow.encoding.onnx_export
import irflow.evaluation.score
import irflow.retrieval.index  # noqa: F401
from irflow.core.config import expand_config, load_config, load_schema, validate_config

__all__ = ["expand_config", "load_config", "load_schema", "validate_config"]
