# verify: every Parquet and JSON file under results/ read back whole, each Parquet page against
# its checksum (irflow.core.verify). Not in the default target: `snakemake --cores 1 verify`,
# with the run's --configfile; a damaged file is named with the command that rebuilds it.


rule verify:
    log:
        "results/logs/verify.log",
    localrule: True
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/verify.py"
