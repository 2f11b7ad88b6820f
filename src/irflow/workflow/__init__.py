"""What the Snakemake workflow reads from Python: the whole configuration check (every feature's
registered checks), the rules' names and input functions (plan, inputs, run_inputs) and each
rule's memory model."""
