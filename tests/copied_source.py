"""A dataset source type written outside irflow, as a user would write one
(tests/test_sources.py): a copy of a local folder, kept in the download cache under a key of its
folder. It uses only irflow's public helpers. ``install`` registers it as pip would, as the
``irflow.sources`` entry point ``copied``."""

import shutil
import tempfile
from pathlib import Path

from irflow.data.download import cached_copy, install_folder
from irflow.data.sources.base import SourceType


class CopiedFolder(SourceType):
    type = "copied"
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "from"],
        "properties": {"type": {"const": "copied"}, "from": {"type": "string"}},
    }

    def problems(self, dataset, spec, config):
        if Path(spec["from"]).is_dir():
            return []
        return [f"config key 'datasets.{dataset}.source.from': no folder {spec['from']}"]

    def cache_key(self, spec):
        return {"copied": str(Path(spec["from"]).resolve())}

    def locate(self, dataset, spec, fetch):
        target, key = fetch.cache_dir / dataset, self.cache_key(spec)
        if cached_copy(target, key, fetch.split):
            return target
        fetch.cache_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=fetch.cache_dir)) / "copy"
        shutil.copytree(spec["from"], staging)
        return install_folder(staging, target, key)


def install(site: Path) -> Path:
    """``site`` as pip leaves a package with the entry point: its dist-info (the module itself
    is this file, importable from the tests' folder). On the path, the type is installed."""
    info = site / "copied_source-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: copied-source\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[irflow.sources]\ncopied = copied_source:CopiedFolder\n"
    )
    return site
