"""Print every offline deck as PDF handouts (`make handouts`).

    python slides/handouts.py [--slides build/slides] [--out build/handouts] [deck ...]

For every build/slides/<deck>.slides.html this writes, with the Chromium the
browser tests use:

* build/handouts/<deck>.pdf: one slide per 16:9 page, every fragment shown,
  interactive figures at their default frame, the slide number on each page;
* build/handouts/<deck>-notes.pdf: the same slides, each with its speaker
  notes below it, for the teacher.

The pages come from reveal.js's own print layout (`?print-pdf`), with
`pdfSeparateFragments=false` (a slide, not one page per fragment step) and
`pdfMaxPagesPerSlide=1`. Chromium embeds every glyph it draws, the Chinese ones
as Type 3 fonts with a Unicode map, so the text can be searched and copied and
the PDF needs no fonts on the reader's machine. The PDF is tagged, so figures
keep their text alternatives. Nothing is fetched from the network.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PRINT_QUERY = "?print-pdf&pdfSeparateFragments=false&pdfMaxPagesPerSlide=1&transition=none"
NOTES_HEIGHT = 560  # px below each slide for its speaker notes (the longest notes fit at 12 px or more)

# Runs in the page once reveal's print layout is ready: the last page must not
# force a page break (reveal's own rule misses it, which printed a blank page),
# and every slide is shown to assistive technology.
LAST_PAGE_JS = """() => {
  const pages = [...document.querySelectorAll('.pdf-page')];
  const last = pages[pages.length - 1];
  last.style.breakAfter = 'avoid';
  last.style.pageBreakAfter = 'avoid';
  // reveal hides every slide but the current one from assistive technology;
  // on paper all are shown, and the PDF's tags (headings, figures and their
  // text alternatives) come from that accessibility tree.
  document.querySelectorAll('.reveal .slides section[aria-hidden]').forEach(s => s.removeAttribute('aria-hidden'));
  return pages.length;
}"""

# Notes handout: make every page taller and put the slide's notes under it,
# shrinking their type until they fit the box (so nothing is cut off).
NOTES_JS = """notesHeight => {
  const width = parseFloat(document.body.style.width), height = parseFloat(document.body.style.height);
  const style = document.createElement('style');
  style.textContent = `@page { size: ${width}px ${height + notesHeight}px; margin: 0; }`;
  document.head.appendChild(style);
  let overflowing = 0;
  for (const page of document.querySelectorAll('.pdf-page')) {
    page.style.height = (height + notesHeight) + 'px';
    let notes = page.querySelector('.speaker-notes-pdf');
    if (!notes) {
      notes = document.createElement('div');
      notes.className = 'speaker-notes speaker-notes-pdf au-no-notes';
      notes.textContent = '（本页没有备注）';
      page.appendChild(notes);
    }
    notes.classList.add('au-notes');
    Object.assign(notes.style, {position: 'absolute', top: (height + 4) + 'px', bottom: 'auto', left: '48px',
                                width: (width - 96) + 'px', height: (notesHeight - 40) + 'px', overflow: 'hidden'});
    for (let size = 22; size >= 12; size--) {
      notes.style.fontSize = size + 'px';
      if (notes.scrollHeight <= notes.clientHeight + 1) break;
    }
    if (notes.scrollHeight > notes.clientHeight + 1) overflowing++;
  }
  return overflowing;
}"""


# Math that MathJax has not rendered (a script with no filled frame), outside speaker notes.
UNTYPESET_JS = """() => [...document.querySelectorAll('script[type^="math/tex"]')].filter(s => {
  const frame = document.getElementById(s.id + '-Frame');
  return !s.closest('aside.notes') && !(frame && frame.childElementCount);
}).length"""


def open_for_print(context, html: Path, notes: bool):
    """The deck in reveal's print layout, every formula typeset; returns (page, log)."""
    page = context.new_page()
    log = browser.watch(page, ("file://",))
    page.goto(html.resolve().as_uri() + PRINT_QUERY + ("&showNotes=true" if notes else ""))
    page.wait_for_function("window.Reveal && Reveal.isReady && Reveal.isReady()", timeout=30_000)
    page.wait_for_function("window.MathJax && MathJax.isReady", timeout=30_000)
    page.wait_for_function("document.querySelectorAll('.pdf-page').length > 0", timeout=30_000)
    # The print layout moves every slide into a page after MathJax may have
    # started: typeset again until nothing is left (a busy machine once printed
    # a deck with no math at all).
    for _ in range(5):
        page.evaluate("() => new Promise(done => MathJax.Hub.Queue(['Typeset', MathJax.Hub], done))")
        if page.evaluate(UNTYPESET_JS) == 0:
            break
    else:
        raise RuntimeError(f"{html.name}: {page.evaluate(UNTYPESET_JS)} formulas never typeset")
    page.evaluate("() => document.fonts.ready")
    return page, log


def print_deck(context, html: Path, out: Path, notes: bool = False) -> int:
    """Write one handout PDF; return its page count (one per slide)."""
    page, log = open_for_print(context, html, notes)
    try:
        pages = page.evaluate(LAST_PAGE_JS)
        if notes:
            overflowing = page.evaluate(NOTES_JS, NOTES_HEIGHT)
            if overflowing:              # the box would clip them: a teacher would lose part of the notes
                raise RuntimeError(f"{out.name}: the speaker notes of {overflowing} slides do not fit under "
                                   f"the slide even at 12 px; shorten them (or raise NOTES_HEIGHT)")
        out.parent.mkdir(parents=True, exist_ok=True)
        page.pdf(path=str(out), prefer_css_page_size=True, print_background=True, tagged=True, outline=True)
    finally:
        page.close()
    problems = log.external + log.failed + log.errors
    if problems:
        raise RuntimeError(f"{html.name}: {problems[:3]}")
    return pages


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("decks", nargs="*", help="deck names (e.g. 01_attention_cues); default: all")
    ap.add_argument("--slides", default=str(ROOT / "build" / "slides"))
    ap.add_argument("--out", default=str(ROOT / "build" / "handouts"))
    args = ap.parse_args(argv)
    slides, out = Path(args.slides), Path(args.out)
    decks = sorted(slides.glob("*.slides.html"))
    if args.decks:
        decks = [d for d in decks if d.name.removesuffix(".slides.html") in args.decks]
    if not decks:
        sys.exit(f"make handouts: no decks in {slides}; run `make slides` first")
    with browser.launch() as context:
        for html in decks:
            stem = html.name.removesuffix(".slides.html")
            for notes in (False, True):
                target = out / f"{stem}{'-notes' if notes else ''}.pdf"
                start = time.monotonic()
                pages = print_deck(context, html, target, notes)
                print(f"  {target}  {pages} pages, {target.stat().st_size / 1024:.0f} KiB,"
                      f" {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
