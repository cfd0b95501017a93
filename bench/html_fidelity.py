"""HTML extraction fidelity: Foundry's lxml extractor against selectolax (lexbor, an HTML5 parser).

    .venv/bin/pip install selectolax==1.0.2   # only for this comparison; Foundry does not use it
    .venv/bin/python bench/html_fidelity.py

The sample manual's 63 paragraphs are written as one messy page (unclosed <p> and <li>, bare
<td>, upper-case end tags, text between <br>s, a formatting tag closed across a paragraph end),
with a script and a nav bar. Word accuracy = words of the paragraphs found in order in the
extracted text / all their words (difflib matching blocks). selectolax has no source positions
(its nodes carry no line numbers), so it could not cite lines of the file; this measures text only.
"""

from __future__ import annotations

import difflib
import html
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.services.extract import extract  # noqa: E402


def page_and_words() -> tuple[str, list[str]]:
    text = (ROOT / "knowledge_base" / "ax200-user-manual.md").read_text()
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip() and not p.startswith("#")]
    forms = ["<p>{e}", "<div>{e}</div>", "<li>{e}", "<p><b>{a}</p>{b}</b>", "<td>{e}", "<p>{e}</P>", "{e}<br>"]
    body = "\n".join(
        forms[i % len(forms)].format(e=html.escape(p), a=html.escape(p[:20]), b=html.escape(p[20:]))
        for i, p in enumerate(paragraphs)
    )
    page = (
        f"<html><head><title>t</title><script>var x = 1</script></head><body><nav>Home Menu</nav>{body}</body></html>"
    )
    return page, " ".join(paragraphs).split()


def accuracy(expected: list[str], got: str) -> float:
    matcher = difflib.SequenceMatcher(a=expected, b=got.split(), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(expected)


def main() -> None:
    page, expected = page_and_words()
    ours = " ".join(b.text.removeprefix("- ") for b in extract(Path("p.html"), page.encode()).blocks)
    print(f"words {len(expected)}; lxml (Foundry extractor): {accuracy(expected, ours.replace(' | ', ' ')):.4f}")
    try:
        from selectolax.lexbor import LexborHTMLParser
    except ImportError:
        print("selectolax not installed: pip install selectolax==1.0.2 to compare")
        return
    tree = LexborHTMLParser(page)
    for node in tree.css("script, style, nav"):
        node.decompose()
    print(f"selectolax/lexbor body text: {accuracy(expected, tree.body.text(separator=' ')):.4f}")


if __name__ == "__main__":
    main()
