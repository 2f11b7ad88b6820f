"""curate: curated copies of a dataset, its tables filtered with their own filter block
(rules/filter.smk), defined by the ``curate`` block."""

from irflow.workflow.kinds.base import DerivedKind


class Curate(DerivedKind):
    name = "curate"
    order = 3
    layout = "curated copies"

    def filter_block(self, dataset):
        return self.datasets[dataset]["filter"]


KIND = Curate
