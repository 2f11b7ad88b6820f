"""curate: curated copies of a dataset, its tables filtered with their own filter block
(rules/filter.smk), defined by the ``curate`` block."""

from irflow.core.config import derived_dataset_problems, register_check
from irflow.workflow.kinds.base import DerivedKind


class Curate(DerivedKind):
    name = "curate"
    order = 3
    layout = "curated copies"

    def filter_block(self, dataset):
        return self.datasets[dataset]["filter"]


KIND = Curate


@register_check
def _curate_problems(config: dict) -> list[str]:
    return derived_dataset_problems(config, "curate")
