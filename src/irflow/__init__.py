"""irflow: reproducible evaluation of text-retrieval systems.

One module per workflow stage (download, ingest, filter, embed, index, retrieve,
score, aggregate); ``contracts`` documents the Parquet files that pass between them.
"""

__version__ = "0.1.0"
