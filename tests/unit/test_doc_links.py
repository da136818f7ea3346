"""Every link and path in README.md and docs/*.md leads somewhere: a Markdown link to a page
(and its section, when it names one) of this checkout, and every repository path the text
names (`docs/...`, `benchmarks/...`, `sample_traces/...`, `examples/...`, `scripts/...`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
PATH = re.compile(r"(?<![\w/.-])(?:docs|benchmarks|sample_traces|examples|scripts)/[\w./-]*[\w/]")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings."""
    text = FENCE.sub("", page.read_text())
    out = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def _problems(page: Path) -> list[str]:
    text = page.read_text()
    name = page.relative_to(ROOT)
    wrong = []
    for m in LINK.finditer(text):
        target = m["target"]
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            wrong.append(f"{name}: link to {target}: no such file")
        elif anchor and anchor not in _anchors(where):
            wrong.append(f"{name}: link to {target}: no such section")
    for m in PATH.finditer(text):
        if not (ROOT / m.group(0)).exists():
            wrong.append(f"{name}: names {m.group(0)}: not in the checkout")
    return wrong


def test_every_link_and_path_in_the_user_docs_exists() -> None:
    assert [w for page in PAGES for w in _problems(page)] == []


def test_a_broken_link_or_path_is_found(tmp_path: Path) -> None:
    # given a page with a link to a missing section, a missing page, and a missing path
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A page\n\n## The part\n")
    page = docs / "b.md"
    page.write_text("[ok](a.md#the-part) [no section](a.md#gone) [no page](c.md)\n"
                    "see `docs/nowhere.md` and `docs/a.md`\n")
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        wrong = _problems(page)
    finally:
        ROOT = root
    # then each broken one is named, the good ones are not
    assert len(wrong) == 3, wrong
    assert "a.md#gone" in wrong[0] and "c.md" in wrong[1] and "docs/nowhere.md" in wrong[2]
