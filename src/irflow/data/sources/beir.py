"""beir: a BEIR dataset by name (``{type: beir, name: scifact}``), which irflow's catalog
(irflow.data.catalog) resolves to the official zip and MD5 sum, fetched as a url source; a
dataset BEIR does not distribute (Robust04, ...) is read from ``data_dir``, as a path source."""

from __future__ import annotations

from irflow.core.errors import ConfigError
from irflow.core.settings_types import SourceBeir
from irflow.data.catalog import catalog_source
from irflow.data.sources.base import SourceType


class CatalogName(SourceType):
    type = "beir"
    schema_def = "source_beir"
    untyped_key = "beir"
    renamed = {"beir": "name"}

    def concrete(self, dataset: str, spec: dict, config: dict) -> dict:
        return catalog_source(self.type, SourceBeir.model_validate(spec).name, dataset, config)

    def problems(self, dataset: str, spec: dict, config: dict) -> list[str]:
        try:
            self.concrete(dataset, spec, config)
        except ConfigError as error:
            return [str(error)]
        return []


SOURCE = CatalogName()
