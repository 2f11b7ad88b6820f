"""Writes docs/datasets.md from irflow's dataset source types (irflow.data.sources, with their
schema fragments) and catalogs (src/irflow/data/catalogs/*.yaml), so that no source type, URL,
MD5 sum or mirror id is written twice.

A mkdocs hook (mkdocs.yml `hooks`) regenerates the page before every build; run this file
(`python docs/hooks/dataset_catalog.py`) to refresh the committed copy after a catalog change.
tests/test_catalog.py fails while the committed page differs from what the catalogs give.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from irflow.data.catalog import BENCHMARKS, catalog, catalog_entry, dataset_names
from irflow.data.sources import SOURCES

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "datasets.md"
SCHEMA = REPO / "config" / "config.schema.yaml"

INTRO = """\
# Datasets

<!-- Generated from src/irflow/data/sources/, config/config.schema.yaml and
src/irflow/data/catalogs/ by docs/hooks/dataset_catalog.py: edit them, not this page. -->

Each dataset's `source` names its `type`; the type is never guessed from the other keys.
"""

SOURCES_END = """
A folder of the dataset's name in `data_dir` is read instead of any source, and nothing is
fetched. A `path` source, and such a folder, are checked when the config is: the path must
exist and a folder must hold the scored split's qrels.

Before source types, irflow told a source by its keys (`{beir: scifact}`, `{url: ...}`,
`{huggingface: ...}`, `{ir_datasets: ...}`, `{path: ...}`); such a source is refused with the
block to write instead. The download job's settings are those of before, so that results
made then are not made again.

## Source types of your own

A package adds a source type as an `irflow.sources` entry point: a subclass of
`irflow.data.sources.base.SourceType` with its `type`, its block's JSON schema (`schema`, with
`type: {const: <type>}`), its `cache_key` and `locate` (and `problems`, its own config checks,
if any). The config check accepts its blocks and the download rule calls its `locate`. In
`pyproject.toml`:

```toml
[project.entry-points."irflow.sources"]
mine = "my_package.sources:MineSource"
```

## Datasets by name

A config names a benchmark's dataset instead of writing its URL and MD5 sum:

```yaml
datasets:
  scifact: {source: {type: beir, name: scifact}}     # one dataset, under a name of your choice
  beir: [nfcorpus, arguana, cqadupstack] # several, each under its own name
  # beir: public                         # every dataset anyone can download (26)
  # beir: all                            # the whole benchmark, the four licensed ones too
```

`beir: all` needs the four datasets BEIR cannot redistribute (BioASQ, Signal-1M, TREC-NEWS,
Robust04; "Datasets to obtain yourself" below) as folders of `data_dir`, and is refused, naming
them, while one is missing; `beir: public` is the other 26 (CQADupStack's 12 subforums count as
12).

irflow fetches the official zip and checks its MD5 sum, as for a `url` source. The catalog
also sets what the benchmark does for the dataset, unless the dataset's block says otherwise:
`split` (the qrels scored: MS MARCO's dev), `remove_self_matches` (a hit whose id is the
query's is dropped), `group` (CQADupStack's 12
subforums count as one dataset, the mean of their members, as in BEIR's Table 2) and
`in_domain` (MS MARCO, which BEIR's systems were trained on: shown, marked ‡, and left out of
the Average, as BEIR leaves it out of its zero-shot comparison; `in_domain: false` counts it).
A dataset that `data_dir` holds, in a folder of its name, is read from there and nothing is
fetched. Under `offline: true`, a dataset that is neither in `data_dir` nor in the download
cache (`download_dir`, as a folder or as its zip) is refused by the dry run, one line naming it
and where to place it, before any job runs.

The mirrors are other places the same dataset is published; give one as the source
(`source: {type: ir_datasets, id: ...}` or `source: {type: huggingface, repo: ...}`) to read
from there instead.
A BeIR repository on Hugging Face holds the corpus and queries; its qrels are in
`BeIR/<name>-qrels`.
"""


def source_types() -> list[str]:
    """One entry per built-in source type: its schema fragment's description and example."""
    defs = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))["$defs"]
    out = []
    for name, source in sorted(SOURCES.built_in().items()):
        fragment = defs[source.schema_def]
        example = yaml.safe_dump(
            fragment["examples"][0], default_flow_style=True, width=200, sort_keys=False
        )
        out.append(f"- `{name}`: {fragment['description']} `source: {example.strip()}`")
    return out


def render() -> str:
    out = [INTRO, *source_types(), SOURCES_END]
    for benchmark in BENCHMARKS:
        book = catalog(benchmark)
        out += [
            f"## {benchmark}\n",
            f"`source: {{type: {benchmark}, name: <name>}}`; zips from {book['url_prefix']}.\n",
            "| name | dataset | split | zip md5 | remove_self_matches | group | mirrors |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        obtain = []
        for name in dataset_names(benchmark):
            entry = catalog_entry(benchmark, name)
            source = entry["source"]
            md5 = f"`{source['md5']}`" if source else "not distributed"
            mirrors = ", ".join(f"{kind} `{id_}`" for kind, id_ in entry["mirrors"].items())
            out.append(
                f"| `{name}` | {entry['title']} | {entry['split']} | {md5} | "
                f"{'yes' if entry['remove_self_matches'] else 'no'} | {entry['group'] or ''} | "
                f"{mirrors or '–'} |"
            )
            if entry["obtain"]:
                obtain.append(f"- **{entry['title']}** (`{name}`): {entry['obtain']}.")
        out += ["", "Datasets to obtain yourself:", "", *obtain, ""]
        out.append(f"How to build each: {book['reproduce_page']}.\n")
    return "\n".join(out)


def on_pre_build(config, **kwargs) -> None:
    """mkdocs hook: the page always shows the catalogs the site is built from."""
    text = render()
    if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
        PAGE.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
