# The settings of rules/qc.smk's voting rerankers; its input functions are the Plan's
# (irflow.workflow.qc_inputs).

from irflow.retrieval.rerankers import reranker_settings as scoring_settings


def reranker_settings(reranker):
    return scoring_settings(config, reranker)
