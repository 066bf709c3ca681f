"""The README and docs/: every relative link and image points at a file that exists, and the README
stays a short front page that opens with the training and test commands and links every page."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 150

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = ("http://", "https://", "mailto:")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def relative_links(text: str) -> list[str]:
    """The targets of `[text](target)` and `![alt](target)` outside code blocks, without `#anchor`;
    web and mail addresses and links within the page are left out."""
    targets = []
    for match in LINK.finditer(FENCE.sub("", text)):
        target = match.group(1)
        if target.startswith(EXTERNAL) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def broken_links(path: Path) -> list[str]:
    return [target for target in relative_links(path.read_text()) if not (path.parent / target).exists()]


def code_blocks(text: str) -> list[str]:
    return [match.group(0) for match in FENCE.finditer(text)]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_exist(path):
    assert not broken_links(path), f"{path.relative_to(ROOT)} links to missing files: {broken_links(path)}"


def test_link_parsing():
    text = (
        "[a](docs/usage.md) ![b](docs/x.png) [`c`](../configs/env/ant.yaml#L3) [d](#anchor) "
        "[e](https://example.org/x.md) [f](mailto:a@b.c) [g [h]](sub/page.md)\n"
        "```bash\npython x.py  # [not](a/link.md)\n```\n"
    )
    assert relative_links(text) == ["docs/usage.md", "docs/x.png", "../configs/env/ant.yaml", "sub/page.md"]


def test_broken_link_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("x")
    page = tmp_path / "docs" / "page.md"
    page.write_text("[ok](here.md#top) [gone](missing.md) ![gone too](img/none.png) [up](../docs/here.md)")
    assert broken_links(page) == ["missing.md", "img/none.png"]


def test_readme_is_a_short_front_page():
    text = README.read_text()
    lines = text.count("\n") + 1
    assert lines < MAX_README_LINES, f"README.md has {lines} lines; the manual belongs in docs/"
    blocks = code_blocks(text)
    assert len(blocks) >= 2, "README.md should open with the training and the test command"
    assert "launch/train.py" in blocks[0], blocks[0]
    assert "pytest" in blocks[1], blocks[1]
    linked = {(README.parent / target).resolve() for target in relative_links(text)}
    unlinked = [str(page.relative_to(ROOT)) for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked]
    assert not unlinked, f"README.md's Documentation list does not link {unlinked}"
