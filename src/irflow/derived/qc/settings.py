"""settings: the ``quality_control`` block: the QC'd datasets and label audits it defines, its
settings, and its cross-references, checked with the config."""

from __future__ import annotations

from irflow.core.config import all_datasets, missing_key, register_check, system_kinds
from irflow.core.settings_types import QualityControl


def list_quality_controlled(config: dict) -> dict[str, dict]:
    """The QC'd datasets (``quality_control.generated``), by name, with their settings as the
    config writes them (their jobs' params)."""
    generated = (config.get("quality_control") or {}).get("generated", {})
    return {name: dict(spec) for name, spec in sorted(generated.items())}


def audited_datasets(config: dict) -> list[str]:
    return list(quality_settings(config).label_audit.datasets)


def quality_settings(config: dict) -> QualityControl:
    """The ``quality_control`` block, typed (irflow.core.settings_types.QualityControl: the
    schema's defaults where the block, or the config, leaves them out)."""
    return QualityControl.model_validate(config.get("quality_control") or {})


def majority_needed(rerankers: int, majority: int | None) -> int:
    """Votes that make a pre-label: ``majority``, or more than half of the rerankers."""
    return int(majority) if majority is not None else rerankers // 2 + 1


@register_check
def quality_control_problems(config: dict) -> list[str]:
    """Cross-references of the ``quality_control`` block, each naming its config key."""
    settings = quality_settings(config)
    systems = system_kinds(config)
    problems = []
    rerankers, generated = settings.rerankers, settings.generated
    audit = settings.label_audit
    for i, name in enumerate(rerankers):
        if name not in config["rerankers"]:
            problems.append(
                missing_key(
                    f"quality_control.rerankers.{i}", name, "rerankers", config["rerankers"]
                )
            )
    if len(set(rerankers)) != len(rerankers):
        problems.append("config key 'quality_control.rerankers': a reranker is listed twice")
    if (generated or audit.datasets) and not rerankers:
        problems.append(
            "config key 'quality_control.rerankers': name the rerankers that vote (keys of "
            "'rerankers'); AIR-Bench uses several"
        )
    majority = settings.majority
    if majority is not None and rerankers and majority > len(rerankers):
        problems.append(
            f"config key 'quality_control.majority': {majority} votes needed but only "
            f"{len(rerankers)} rerankers vote"
        )
    for name, spec in generated.items():
        path = f"quality_control.generated.{name}"
        if spec.dataset not in config.get("generate", {}):
            problems.append(
                missing_key(f"{path}.dataset", spec.dataset, "generate", config.get("generate", {}))
            )
        if spec.retriever not in config["retrievers"]:
            problems.append(
                missing_key(f"{path}.retriever", spec.retriever, "retrievers", config["retrievers"])
            )
        scored = config.get("generate", {}).get(spec.dataset, {}).get("split", "test")
        if spec.splits is not None and scored not in spec.splits:
            problems.append(
                f"config key '{path}.splits': {spec.splits} leaves out {scored!r}, the split "
                f"'generate.{spec.dataset}.split' scores"
            )
        if spec.depth > config["top_k"]:
            problems.append(
                f"config key '{path}.depth': {spec.depth} exceeds top_k ({config['top_k']}), "
                "the depth of the retriever's run"
            )
    datasets = all_datasets(config)
    for i, dataset in enumerate(audit.datasets):
        if dataset not in datasets:
            path = f"quality_control.label_audit.datasets.{i}"
            problems.append(missing_key(path, dataset, "datasets", datasets))
    for i, system in enumerate(audit.systems or []):
        if system not in systems:
            path = f"quality_control.label_audit.systems.{i}"
            problems.append(missing_key(path, system, "systems", systems))
    needs_llm = generated or (audit.datasets and audit.judge)
    if needs_llm and not (config.get("llm") or {}).get("model"):
        problems.append(
            "config key 'llm.model': needed by 'quality_control' (the judge); name the model"
        )
    return problems
