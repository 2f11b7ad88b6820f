# The settings of rules/qc.smk's voting rerankers; its input functions are the Plan's
# (irflow.workflow.qc_inputs).


def reranker_settings(reranker):
    spec = config["rerankers"][reranker]
    settings = {"reranker_name": reranker, "reranker": spec}
    if spec["type"] == "bi-encoder":
        settings["model"] = plan.model_result_settings(spec["model"])
    return settings
