# irflow: download -> ingest (or positionalize) -> filter -> embed -> index -> retrieve -> (fuse, rerank) -> score
#         -> cost, significance -> aggregate -> correlate -> plots (report), database
# Every wildcard value comes from the validated config; see config/config.schema.yaml.

import os
import re
import sys
from pathlib import Path

from snakemake.utils import min_version

from irflow.core.errors import COMMAND_VARIABLE, ConfigError
from irflow.data.sources import offline_dataset_problems
from irflow.workflow.config import (
    errors_end_on_the_message,
    expand_config,
    load_schema,
    validate_config,
)
from irflow.workflow.experiment import RECORD as EXPERIMENT_RECORD
from irflow.workflow.experiment import check_experiment, experiment, snakemake_command
from irflow.workflow.guard import guard_input_functions
from irflow.workflow.interrupted import claim_when_planning, clear_after_dead_runs
from irflow.workflow.model_check import hub_model_problems, offline_model_problems
from irflow.workflow.rule_directives import analysis_rule_files
from irflow.workflow.run_end import after_failure, after_success
from irflow.workflow.snakemake_internals import (
    given_config_files,
    is_dry_run,
    is_main_process,
    main_snakefile,
    read_config_files,
    rules_of,
)
from irflow.workflow.stamps import STAMP_INPUT, settings_stamp

min_version("9.0")

# A killed run's stale lock and its jobs' temporary files go before Snakemake locks this run.
if is_main_process(workflow):
    for message in clear_after_dead_runs(Path(".snakemake"), Path("results")):
        print(message, file=sys.stderr)


report: "report/workflow.rst"


# --configfile replaces the default experiment rather than merging into it.
if not given_config_files(workflow):

    configfile: "config/config.yaml"


# Validated once, with defaults filled in; scripts read the same dict as snakemake.config.
with errors_end_on_the_message():
    _validated = validate_config(
        expand_config(config),
        load_schema(workflow.source_path("config/config.schema.yaml")),
    )
    config.clear()
    config.update(_validated)
    # results/ holds one experiment: a run of other config files is refused before any job starts.
    EXPERIMENT = experiment(config, read_config_files(workflow))
    check_experiment(EXPERIMENT)
    # Offline, a dataset or model that is not at hand is named now rather than when its job fails.
    if is_main_process(workflow) and (
        _missing := offline_dataset_problems(config) + offline_model_problems(config)
    ):
        raise ConfigError("\n".join(_missing))
# What a damaged file's error tells the user to run (kept from the run that submitted a job).
os.environ.setdefault(
    COMMAND_VARIABLE,
    snakemake_command(given_config_files(workflow), main_snakefile(workflow)),
)


include: "rules/common.smk"


wildcard_constraints:
    dataset=one_of(plan.datasets),
    model=one_of(config["models"]),
    index=one_of(config["indexes"]),
    side="corpus|passages|queries",


include: "rules/download.smk"
include: "rules/positionalize.smk"
include: "rules/generate.smk"
include: "rules/expand.smk"
include: "rules/derive.smk"
include: "rules/ingest.smk"
include: "rules/curate.smk"
include: "rules/filter.smk"
include: "rules/negatives.smk"
include: "rules/passages.smk"
include: "rules/embed.smk"
include: "rules/index.smk"
include: "rules/retrieve.smk"
include: "rules/vectors.smk"
include: "rules/fuse.smk"
include: "rules/external_run.smk"
include: "rules/rerank.smk"
include: "rules/qc.smk"
include: "rules/quality_control.smk"
include: "rules/label_audit.smk"
include: "rules/score.smk"
include: "rules/cost.smk"
include: "rules/aggregate.smk"
include: "rules/significance.smk"
include: "rules/unigrams.smk"
include: "rules/correlate.smk"
include: "rules/plots.smk"
include: "rules/database.smk"
include: "rules/verify.smk"


# Each analysis's rules (rules/analyses/<name>.smk) add its final outputs to the default target.
ANALYSIS_TARGETS = []
for _analysis in analysis_rule_files(workflow.basedir):

    include: _analysis


rule all:
    default_target: True
    input:
        rules.aggregate.output,
        rules.plots.output,
        rules.database.output,
        rules.filter_summary.output,
        *ANALYSIS_TARGETS,
        rules.label_audit_summary.output if plan.audited else [],
        rules.quality_control_summary.output if QUALITY_CONTROL.datasets else [],
        # The files the database's views read when queried, so that one deleted is made again:
        # Snakemake remakes a missing file only for a job that has to run, and the database's
        # job, its output there, does not.
        unpack(plan.database_inputs),


# Each job's settings are kept beside the results by an input function that names no file, so
# that a changed setting reruns the job even without Snakemake's records in .snakemake/
# (irflow.workflow.stamps); it acts before the rule's other input functions, which then see
# the outputs as it leaves them. An input function that raises ends the run, naming it:
# Snakemake would drop the job, and everything after it, from the run (irflow.workflow.guard).
# What this reads and changes of Snakemake's rules is in irflow.workflow.snakemake_internals.
# As the run starts to plan, a run while another runs here is refused, naming it.
_claim_this_folder = claim_when_planning(workflow)
for _rule in rules_of(workflow):
    _stamp = None
    if _rule.params:
        _stamp = settings_stamp(_rule, lambda: is_dry_run(workflow))
        _rule.add_input_function(STAMP_INPUT, _stamp)
    guard_input_functions(_rule, before=_claim_this_folder, stamp=_stamp)


# Online, a model the Hugging Face hub cannot give is named before any job runs. Here rather
# than where the config is read: Snakemake calls onstart only when jobs are about to run, so a
# dry run, a report or an up-to-date run plans without touching the network.
onstart:
    with errors_end_on_the_message():
        if _unavailable := hub_model_problems(config):
            raise ConfigError("\n".join(_unavailable))


# The end of a run: its results table and the report's command; after a failure, the tables
# and database of what finished, in results/partial/ (irflow.workflow.run_end).
onsuccess:
    after_success(workflow)


onerror:
    after_failure(workflow)
