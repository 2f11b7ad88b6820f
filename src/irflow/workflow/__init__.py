"""What the Snakemake workflow reads from Python: the whole configuration check (every feature's
registered checks) and each rule's memory model."""
