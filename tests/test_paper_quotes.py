"""Every quote of AIR-Bench, Arctic-Embed, PosIR and the overview of benchmarks and metrics in
docs, code, configs and tests is the paper's text at the line it names: a quote in straight
double quotes followed by its citation,
``"words" (airbench.txt, line 45)`` or ``(shared/references/arctic-embed.txt, lines 57-58)``,
occurs in ../shared/references/<file> within those lines (their text joined, table bars and
runs of spaces made one space; "[...]" or "…" in a quote leaves words out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

PAPERS = ("airbench.txt", "arctic-embed.txt", "benchmarks-and-metrics.txt", "posir.txt")
# A quote, then its citation: "(" anything without quotes or brackets, the file, the line(s).
CITED = re.compile(
    r'"(?P<quote>[^"]{3,})"[\s,.;:]*\((?P<before>[^()"]*?)(?P<file>'
    + "|".join(re.escape(p) for p in PAPERS)
    + r"),? lines? (?P<first>\d+)(?:\s*[-–]\s*(?P<last>\d+))?\)"
)
# What leaves words out of a quote.
OMISSION = re.compile(r"\[\.\.\.\]|\[…\]|…|\.\.\.")
SOURCES = ("docs", "src", "config", "tests", "scripts", "README.md")


def flattened(path: Path) -> str:
    """The file's text with its lines joined by spaces, comment marks at line starts dropped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return " ".join(re.sub(r"^\s*(#+\s?|\*\s|-\s)?", "", line) for line in lines)


def normalised(text: str) -> str:
    return " ".join(text.replace("|", " ").split())


def quotes() -> list[tuple[str, str, int, int, str]]:
    """(where, file, first line, last line, quote) of every cited quote."""
    found = []
    for source in SOURCES:
        root = REPO / source
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in paths:
            if path.suffix not in (".md", ".py", ".yaml") or path == Path(__file__):
                continue
            for match in CITED.finditer(flattened(path)):
                first = int(match["first"])
                last = int(match["last"] or first)
                where = f"{path.relative_to(REPO)}: {match.group(0)[:70]}"
                found.append((where, match["file"], first, last, match["quote"]))
    return found


def missing_parts(paper: list[str], first: int, last: int, quote: str) -> list[str]:
    """The parts of ``quote`` not found in lines ``first`` to ``last`` of ``paper``."""
    text = normalised(" ".join(paper[first - 1 : last]))
    parts = [normalised(part) for part in OMISSION.split(quote) if normalised(part)]
    return [part for part in parts if part.strip(" ,.;:") not in text] if last >= first else [quote]


def test_every_quote_of_the_papers_is_at_the_line_it_names(shared_references):
    papers = {
        name: (shared_references / name).read_text(encoding="utf-8").splitlines() for name in PAPERS
    }
    found = quotes()
    wrong = [
        f"{where}: not at {name} lines {first}-{last}: {missing}"
        for where, name, first, last, quote in found
        if (missing := missing_parts(papers[name], first, last, quote))
    ]
    assert not wrong, "\n".join(wrong)
    # The check reads what this task quotes: the judge's prompt, the filters, the negatives,
    # the seeds and the mean ± sd over them (docs/metrics.md, irflow.core.seeds).
    by_file = {name: sum(1 for q in found if q[1] == name) for name in PAPERS}
    assert by_file["airbench.txt"] >= 6 and by_file["arctic-embed.txt"] >= 10, by_file
    seeds = {(q[0].split(":")[0], q[2]) for q in found if q[1] == "benchmarks-and-metrics.txt"}
    assert {("docs/metrics.md", 629), ("docs/metrics.md", 643)} <= seeds, seeds
    assert {("src/irflow/core/seeds.py", 629), ("src/irflow/core/seeds.py", 643)} <= seeds, seeds
    assert by_file["posir.txt"] >= 6, by_file


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('"we retrieved the top 100 hardest negatives" (arctic-embed.txt, line 57)', True),
        ('"we retrieved the top 100 hardest negatives" (arctic-embed.txt, line 56)', False),
        ('"we retrieved [...] hardest negatives" (arctic-embed.txt, lines 55-57)', True),
        ('"we retrieved the top 10 hardest negatives" (arctic-embed.txt, line 57)', False),
    ],
)
def test_the_check_finds_a_misplaced_or_changed_quote(tmp_path, shared_references, text, ok):
    path = tmp_path / "page.md"
    path.write_text(f"Arctic:\n{text}.\n", encoding="utf-8")
    (match,) = CITED.finditer(flattened(path))
    paper = (shared_references / match["file"]).read_text(encoding="utf-8").splitlines()
    first, last = int(match["first"]), int(match["last"] or match["first"])
    assert not missing_parts(paper, first, last, match["quote"]) == ok


def test_the_curation_page_quotes_each_filter_of_appendix_c_at_its_line():
    """docs/curation.md quotes every heuristic of Arctic-Embed's Appendix C (arctic-embed.txt,
    lines 202-241, one every third line), the consistency filter (line 49) and the mining rule
    (line 57), and no longer says the appendix was not at hand. (Before: it quoted them second
    hand, "as issue 38 quotes them", with no line.)"""
    page = REPO / "docs" / "curation.md"
    cited = {
        first
        for where, name, first, _, _ in quotes()
        if name == "arctic-embed.txt" and where.startswith("docs/curation.md")
    }
    assert {*range(202, 242, 3), 49, 57} <= cited, sorted({*range(202, 242, 3), 49, 57} - cited)
    assert "not at hand" not in page.read_text(encoding="utf-8")


def test_the_position_page_quotes_posirs_pooling_query_types_and_bucket_correlation():
    """docs/position.md quotes PosIR where irflow follows it beside PSI: the saliency pooled
    over its English pairs (posir.txt, line 81), Table 6's query-type heuristic (line 184) and
    each bucket's correlation with an outside benchmark (line 67); the code beside them quotes
    the same lines."""
    cited = {}
    for where, name, first, _, _ in quotes():
        if name == "posir.txt":
            cited.setdefault(where.split(":")[0], set()).add(first)
    assert {67, 81, 184} <= cited.get("docs/position.md", set()), cited
    assert 81 in cited.get("src/irflow/analyses/saliency.py", set()), cited
    assert 184 in cited.get("src/irflow/analyses/query_types.py", set()), cited
    assert 67 in cited.get("src/irflow/analyses/correlate.py", set()), cited
