# The names and input functions shared by the rules, built once from the validated config:
# `plan.datasets`, `plan.rerank_inputs`, ... (irflow.workflow.plan, inputs, run_inputs).
# Every wildcard value comes from the validated config.

import functools

from irflow.core.config import scored_split
from irflow.workflow.inputs import one_of
from irflow.workflow.local_files import tokenizer_files
from irflow.workflow.run_inputs import Plan
from irflow.workflow.snakemake_internals import recorded_inputs

plan = Plan(config, workflow.basedir)
plan.recorded_inputs = functools.partial(recorded_inputs, workflow)

# The memory each job asks for (`resources: mem_mb=`): a model per rule, in irflow.workflow.resources.
from irflow.workflow import resources as memory
