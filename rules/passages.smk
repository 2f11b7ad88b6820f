# passages: a filtered corpus -> overlapping passages by a model's tokenizer, for models that
# read long documents as passages (long_documents firstp or maxp). See irflow.data.passages.


rule passages:
    input:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
        tokenizer=lambda wc: tokenizer_files(plan.passages_tokenizer(wc)),
    output:
        passages="results/datasets/{dataset}/passages/{model}.parquet",
        manifest="results/manifests/passages/{dataset}/{model}.json",
    log:
        "results/logs/passages/{dataset}/{model}.log",
    wildcard_constraints:
        model=one_of(plan.passage_models),
    conda:
        "../envs/models.yaml"
    params:
        long_documents=lambda wc: config["models"][wc.model]["long_documents"],
        tokenizer=plan.passages_tokenizer,
        # Only the window check reads these; as params a change reruns it.
        prompt=lambda wc: config["models"][wc.model]["document_prompt"],
        max_seq_length=lambda wc: config["models"][wc.model]["max_seq_length"],
    script:
        "../scripts/passages.py"
