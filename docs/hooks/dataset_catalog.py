"""Writes docs/datasets.md from irflow's dataset catalogs (src/irflow/data/catalogs/*.yaml), so
that no URL, MD5 sum or mirror id is written twice.

A mkdocs hook (mkdocs.yml `hooks`) regenerates the page before every build; run this file
(`python docs/hooks/dataset_catalog.py`) to refresh the committed copy after a catalog change.
tests/test_catalog.py fails while the committed page differs from what the catalogs give.
"""

from __future__ import annotations

from pathlib import Path

from irflow.data.catalog import BENCHMARKS, catalog, catalog_entry, dataset_names

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "datasets.md"

INTRO = """\
# Datasets by name

<!-- Generated from src/irflow/data/catalogs/ by docs/hooks/dataset_catalog.py: edit the
catalog, not this page. -->

A config names a benchmark's dataset instead of writing its URL and MD5 sum:

```yaml
datasets:
  scifact: {source: {beir: scifact}}     # one dataset, under a name of your choice
  beir: [nfcorpus, arguana, cqadupstack] # several, each under its own name
  # beir: all                            # the whole benchmark
```

irflow fetches the official zip and checks its MD5 sum, as for a `url` source. The catalog
also sets what the benchmark does for the dataset, unless the dataset's block says otherwise:
`split` (the qrels scored: MS MARCO's dev), `remove_self_matches` (a hit whose id is the
query's is dropped) and `group` (CQADupStack's 12
subforums count as one dataset, the mean of their members, as in BEIR's Table 2). A dataset
that `data_dir` holds, in a folder of its name, is read from there and nothing is fetched.

The mirrors are other places the same dataset is published; give one as the source
(`source: {ir_datasets: ...}` or `source: {huggingface: ...}`) to read from there instead.
A BeIR repository on Hugging Face holds the corpus and queries; its qrels are in
`BeIR/<name>-qrels`.
"""


def render() -> str:
    out = [INTRO]
    for benchmark in BENCHMARKS:
        book = catalog(benchmark)
        out += [
            f"## {benchmark}\n",
            f"`source: {{{benchmark}: <name>}}`; zips from {book['url_prefix']}.\n",
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
