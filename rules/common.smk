# The names and input functions shared by the rules, built once from the validated config:
# `plan.datasets`, `plan.rerank_inputs`, ... (irflow.workflow.plan, inputs, run_inputs).
# Every wildcard value comes from the validated config.

from irflow.core.config import scored_split
from irflow.workflow.inputs import one_of
from irflow.workflow.local_files import tokenizer_files
from irflow.workflow.run_inputs import Plan

plan = Plan(config, workflow.basedir)

# The memory each job asks for (`resources: mem_mb=`): a model per rule, in irflow.workflow.resources.
from irflow.workflow import resources as memory
