"""Writes docs/install.md and docs/quickstart.md from the README's sections, so that the site's
first pages are the README's words, never a copy that drifts.

A mkdocs hook (mkdocs.yml `hooks`) regenerates them before every build; run this file
(`python docs/hooks/readme_pages.py`) to refresh the committed copies after a README change.
tests/test_docs.py fails while a committed page differs from what the README gives.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# Each page: its title and the README sections it holds, in order.
PAGES = {
    "install.md": ("Install", ["Install", "Test"]),
    "quickstart.md": (
        "Quickstart",
        [
            "Quickstart",
            "Your own data: the BEIR format",
            "Your own retriever",
            "Reading the results",
            "The report",
        ],
    ),
}
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def section(text: str, heading: str) -> str:
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if found is None:
        raise SystemExit(f"README.md has no '## {heading}' section")
    return found.group(1).strip()


def site_link(match: re.Match) -> str:
    """A README link as the site reads it: docs/ pages relative to the site, web addresses as
    they are, and files of the repository (configs, CONTRIBUTING.md) as their text."""
    text, target = match.groups()
    if target.startswith("docs/"):
        return f"[{text}]({target.removeprefix('docs/')})"
    if re.match(r"[a-z]+://", target):
        return match.group(0)
    return text


def render(name: str) -> str:
    title, headings = PAGES[name]
    readme = README.read_text(encoding="utf-8")
    parts = [
        f"# {title}",
        "<!-- Generated from README.md by docs/hooks/readme_pages.py: edit the README. -->",
    ]
    for heading in headings:
        body = LINK.sub(site_link, section(readme, heading))
        parts.append(body if heading == title else f"## {heading}\n\n{body}")
    return "\n\n".join(parts) + "\n"


def write_pages() -> list[Path]:
    written = []
    for name in PAGES:
        page = REPO / "docs" / name
        text = render(name)
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            page.write_text(text, encoding="utf-8")
            written.append(page)
    return written


def on_pre_build(config, **kwargs) -> None:
    """mkdocs hook: the pages always show the README the site is built from."""
    write_pages()


if __name__ == "__main__":
    for page in write_pages():
        print(f"wrote {page.relative_to(REPO)}")
