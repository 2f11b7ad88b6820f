# index: document (or passage) embeddings -> faiss index (flat, HNSW, IVF or IVF-PQ), with build
# time and size recorded in the manifest. Only build settings are params: changing nprobe,
# ef_search, refine_factor or mmap reruns retrieval, never the index.
# index_bm25: the filtered corpus -> a BM25 retriever's bm25s index (BM25.save), once per
# dataset and retriever; every job that searches it (retrieve, qc_candidates, negatives) loads
# it memory-mapped. Its params are the settings the score matrix depends on (k1, b, ...).
# index_lucene: the filtered corpus -> Anserini's Lucene index in one layout (flat or
# multifield), once per dataset and layout, shared by every lucene retriever of that layout:
# k1, b and feedback are search-time settings, which rerun the search, never the index.

from irflow.retrieval.bm25 import index_settings as bm25_index_settings
from irflow.retrieval.index import build_settings
from irflow.workflow.families.bm25 import index_folder as bm25_index_folder
from irflow.workflow.families.lucene import index_folder as lucene_index_folder
from irflow.workflow.families.lucene import LUCENE_SEARCH_MIB


rule index:
    input:
        source="results/datasets/{dataset}/source.json",
        embeddings=plan.document_embeddings,
    output:
        index="results/indexes/{dataset}/{model}/{index}.faiss",
        manifest="results/manifests/index/{dataset}/{model}/{index}.json",
    log:
        "results/logs/index/{dataset}/{model}/{index}.log",
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        mem_mb=lambda wc, input, attempt: memory.index_mb(
            input.embeddings, config["indexes"][wc.index], attempt
        ),
    params:
        index=lambda wc: build_settings(config["indexes"][wc.index]),
    script:
        "../scripts/index.py"


rule index_bm25:
    input:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
    output:
        index=directory(bm25_index_folder("{dataset}", "{system}")),
        manifest="results/manifests/index_bm25/{dataset}/{system}.json",
    log:
        "results/logs/index_bm25/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.bm25_systems),
    conda:
        "../envs/data.yaml"
    threads: 1  # bm25s tokenises and scores in one process
    resources:
        mem_mb=lambda wc, input, attempt: memory.bm25_mb(input.corpus, attempt),
        disk_mb=lambda wc, input: memory.bm25_tmp_mb(input.corpus),  # postings in TMPDIR
    params:
        settings=lambda wc: bm25_index_settings(plan.retrievers[wc.system]),
    script:
        "../scripts/index_bm25.py"


rule index_lucene:
    input:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
    output:
        index=directory(lucene_index_folder("{dataset}", "{fields}")),
        manifest="results/manifests/index_lucene/{dataset}/{fields}.json",
    log:
        "results/logs/index_lucene/{dataset}/{fields}.log",
    wildcard_constraints:
        fields=one_of(plan.lucene_layouts),
    conda:
        "../envs/lucene.yaml"
    threads: 1  # Anserini's indexing threads (-threads), capped by --cores
    resources:
        mem_mb=lambda wc, attempt: memory.request_mb(LUCENE_SEARCH_MIB, attempt),
    script:
        "../scripts/index_lucene.py"
