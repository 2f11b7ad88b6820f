"""Data in: downloads, ingest into the contracts' tables, filters and curation, passages and
tokenizers."""
