"""generate: a new benchmark from any dataset's corpus, written by a language model (AIR-Bench);
the whole design is in dataset.py."""
