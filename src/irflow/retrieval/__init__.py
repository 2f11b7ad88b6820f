"""Runs: indexes, first-stage retrieval (BM25, dense, sparse, late interaction), fusion, reranking
and external runs."""
