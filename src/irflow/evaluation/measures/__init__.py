"""measures: the measures irflow computes that trec_eval lacks, one module each, and the names
of every measure results.md and the report show.

Each module of this package defines ``MEASURE`` (an irflow.evaluation.measures.base.Measure):
the name a ``metrics`` spec gives it (``name.k1,k2``), its per-query values, each named
``<name>_<k>``, and the name a paper prints for it with what it means. irflow.evaluation.score
asks this registry for every spec pytrec_eval does not know, so a new measure is its module,
its test and its part of docs/metrics.md. trec_eval's own measures are named in ``TREC_EVAL``.
"""

from __future__ import annotations

from dataclasses import dataclass

from irflow.core.plugins import Registry
from irflow.evaluation.measures.base import Measure

# Every module of this package that defines a MEASURE, by its name.
MEASURES: Registry[Measure] = Registry("measure", __name__, "MEASURE", key="name")


# trec_eval's measures as a paper names them and what each means, "{k}" for a cutoff; a measure
# of the whole ranking is "@{depth}", the depth every run is cut to (top_k).
TREC_EVAL = {
    "ndcg_cut": (
        "nDCG@{k}",
        "normalised discounted cumulative gain of the top {k}, the grade as the gain "
        "(trec_eval's ndcg_cut, as BEIR and MTEB report it)",
    ),
    "ndcg": ("nDCG@{depth}", "nDCG of the whole ranking, the grade as the gain"),
    "recall": (
        "Recall@{k}",
        "the relevant documents in the top {k} / all the query's relevant documents",
    ),
    "P": ("P@{k}", "the relevant documents in the top {k} / {k}"),
    "map": (
        "MAP@{depth}",
        "average precision: the mean, over the query's relevant documents, of the precision at "
        "each one's rank in the whole ranking (0 for one not retrieved)",
    ),
    "map_cut": ("MAP@{k}", "average precision over the top {k}"),
    "gm_map": ("GMAP@{depth}", "average precision, its geometric mean over the queries"),
    "recip_rank": ("MRR@{depth}", "1 / the rank of the first relevant document (0 if none)"),
    "Rprec": ("R-Precision", "the precision of the top R, R the query's relevant documents"),
    "bpref": ("bpref", "how few judged non-relevant documents rank above the relevant ones"),
    "success": ("Success@{k}", "1 where a relevant document is in the top {k}, else 0"),
    "num_q": ("queries", "the number of queries scored"),
    "num_ret": ("retrieved", "the documents retrieved, summed over the queries"),
    "num_rel": ("relevant", "the relevant documents, summed over the queries"),
    "num_rel_ret": ("relevant retrieved", "the relevant documents retrieved, summed"),
}


@dataclass(frozen=True)
class MetricName:
    """A metric as results.md and the report name it: ``metric``, trec_eval's id
    (``ndcg_cut_10``), ``title``, the name a paper prints (nDCG@10), and ``meaning``."""

    metric: str
    title: str
    meaning: str

    @property
    def label(self) -> str:
        """The title with the id beside it: "nDCG@10 (ndcg_cut_10)"."""
        return self.title if self.title == self.metric else f"{self.title} ({self.metric})"


def metric_name(metric: str, depth: int | None = None) -> MetricName:
    """The name of a per-query metric (``ndcg_cut_10``, ``recall_cap_100``, ``map``): its
    measure's title and meaning with the cutoff, and ``depth`` (every run's, top_k) for a
    measure of the whole ranking (MAP@1000; MAP without it). A metric no measure here names
    keeps its id."""
    measure, _, cutoff = metric.rpartition("_")
    if not (cutoff.isdigit() and _named(measure)):
        measure, cutoff = metric, ""
    named = _named(measure)
    if named is None:
        return MetricName(metric, metric, f"trec_eval's {metric}")
    title, meaning = named
    if depth is None:
        title = title.replace("@{depth}", "")
    return MetricName(metric, title.format(k=cutoff, depth=depth), meaning.format(k=cutoff))


def _named(measure: str) -> tuple[str, str] | None:
    if measure in MEASURES.all():
        found = MEASURES.get(measure)
        return found.title, found.meaning
    return TREC_EVAL.get(measure)
