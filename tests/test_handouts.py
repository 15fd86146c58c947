"""The PDF handouts (`make handouts`): one page per slide, nothing cut, real Chinese text.

Checked with poppler's tools (Debian's poppler-utils, installed by `make test`):
pdfinfo for the page count, pdffonts for embedding, pdftotext for the text
layer, pdftoppm to render every page. Run alone, the tests build missing or
stale handouts themselves, and skip (with the reason) when chromium or poppler
is missing; with SLIDES_TESTS_REQUIRED=1 (set by `make test`) they fail instead.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "slides"))
import browser  # noqa: E402
import build  # noqa: E402

NOTEBOOKS = Path(os.environ.get("NOTEBOOKS", ROOT / "notebooks"))
if not NOTEBOOKS.is_absolute():
    NOTEBOOKS = ROOT / NOTEBOOKS
DECKS = sorted(NOTEBOOKS.glob("*.ipynb"))
SLIDES = ROOT / "build" / "slides"
HANDOUTS = ROOT / "build" / "handouts"
REQUIRED = os.environ.get("SLIDES_TESTS_REQUIRED") == "1"
CJK = re.compile(r"[\u4e00-\u9fff]")
PLACEHOLDER_ALT = "No description has been provided for this image"


def missing(reason: str):
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


def run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def slide_count(deck: Path) -> int:
    nb = nbformat.read(deck, as_version=4)
    return sum(c.metadata.get("slideshow", {}).get("slide_type") in ("slide", "subslide") for c in nb.cells)


@pytest.fixture(scope="session")
def pdfs():
    """build/handouts/ up to date with every deck (built here if stale)."""
    if not DECKS:
        pytest.skip(f"no decks in {NOTEBOOKS}")
    for tool in ("pdfinfo", "pdffonts", "pdftotext", "pdftoppm"):
        if shutil.which(tool) is None:
            missing(f"{tool} not installed: `make browser` (apt-get install poppler-utils)")
    newest_tool = max(t.stat().st_mtime for t in (ROOT / "slides").glob("*.*") if t.is_file())
    stale = [d for d in DECKS for suffix in ("", "-notes")
             if not (HANDOUTS / f"{d.stem}{suffix}.pdf").exists()
             or (HANDOUTS / f"{d.stem}{suffix}.pdf").stat().st_mtime < max(d.stat().st_mtime, newest_tool)]
    if stale:
        if browser.chromium_path() is None:
            missing("chromium not installed: `make browser`")
        if not (ROOT / "node_modules" / "reveal.js").exists():
            missing("node_modules/ missing: run `make slides` (needs npm)")
        if not all((SLIDES / f"{d.stem}.slides.html").exists()
                   and (SLIDES / f"{d.stem}.slides.html").stat().st_mtime >= max(d.stat().st_mtime, newest_tool)
                   for d in DECKS):
            build.main(["--notebooks", str(NOTEBOOKS), "--out", str(SLIDES)])
        # In its own process: a browser test in this one may already drive Playwright.
        subprocess.run([sys.executable, str(ROOT / "slides" / "handouts.py"), "--slides", str(SLIDES),
                        "--out", str(HANDOUTS)], check=True)
    return HANDOUTS


def pages_of(pdf: Path) -> int:
    return int(re.search(r"^Pages:\s+(\d+)", run("pdfinfo", str(pdf)), re.M).group(1))


RESOLUTION = 36  # dpi for pdftoppm: a 1331x748 px page becomes 500x280 pixels


def rendered_pages(pdf: Path, resolution: int) -> list[Image.Image]:
    """Every page as a small greyscale picture (pdftoppm)."""
    out = Path(run("mktemp", "-d").strip())
    try:
        subprocess.run(["pdftoppm", "-r", str(resolution), "-gray", "-png", str(pdf), str(out / "p")], check=True)
        return [Image.open(io.BytesIO(p.read_bytes())).convert("L") for p in sorted(out.glob("p-*.png"))]
    finally:
        shutil.rmtree(out, ignore_errors=True)


def alt_texts(pdf: Path) -> list[str]:
    """The /Alt text of every tagged figure (Chromium writes them uncompressed)."""
    data = pdf.read_bytes()
    texts = []
    for m in re.finditer(rb"/S /Figure\s*/Alt (<[0-9A-Fa-f]*>|\((?:\\.|[^\\)])*\))", data):
        raw = m.group(1)
        if raw.startswith(b"<"):
            texts.append(bytes.fromhex(raw[1:-1].decode()).decode("utf-16"))
        else:
            texts.append(raw[1:-1].decode("latin-1"))
    return texts


@pytest.mark.parametrize("deck", DECKS, ids=[d.stem for d in DECKS])
def test_handout_has_one_page_per_slide_and_nothing_cut(pdfs, deck):
    for suffix in ("", "-notes"):
        pdf = pdfs / f"{deck.stem}{suffix}.pdf"
        assert pages_of(pdf) == slide_count(deck), f"{pdf.name}: pages != slides"
        problems = []
        for n, page in enumerate(rendered_pages(pdf, RESOLUTION), start=1):
            w, h = page.size
            if suffix == "":
                assert abs(w / h - 16 / 9) < 0.02, f"{pdf.name} page {n} is {w}x{h}, not 16:9"
            dark = np.asarray(page) < 200
            if dark.sum() < 40:
                problems.append(f"page {n} is blank")
            # reveal insets the 1280x720 slide by 14-25 px on the page; content that
            # reaches the outer 10 px was cut off by the page (the slide number,
            # bottom right, excepted).
            band = max(2, round(10 * RESOLUTION / 96))
            number = round(80 * RESOLUTION / 96)
            edge = np.zeros_like(dark)
            edge[:band, :] = edge[-band:, :-number] = True
            edge[:-number, :band] = edge[:-number, -band:] = True
            if (dark & edge).any():
                problems.append(f"page {n}: content reaches the page edge (cut off)")
        assert not problems, f"{pdf.name}: " + "; ".join(problems)


@pytest.mark.parametrize("deck", DECKS, ids=[d.stem for d in DECKS])
def test_handout_fonts_are_embedded_and_the_chinese_is_text(pdfs, deck):
    nb = nbformat.read(deck, as_version=4)
    title = build.title_info(nb, deck.stem)["title"]
    for suffix in ("", "-notes"):
        pdf = pdfs / f"{deck.stem}{suffix}.pdf"
        fonts = run("pdffonts", str(pdf)).splitlines()[2:]
        assert fonts, f"{pdf.name}: no fonts"
        for line in fonts:
            emb = line[-27:].split()[0] if len(line) >= 27 else ""
            assert emb == "yes", f"{pdf.name}: font not embedded: {line}"
        pages = run("pdftotext", "-layout", str(pdf), "-").split("\f")
        text = "".join(pages)
        assert title.replace(" ", "") in text.replace(" ", ""), f"{pdf.name}: the title {title!r} is not in the text layer"
        chinese_pages = sum(bool(CJK.search(p)) for p in pages if p.strip())
        assert chinese_pages == pages_of(pdf), f"{pdf.name}: {chinese_pages} pages with Chinese text"
        compact = text.replace(" ", "").replace("\n", "")
        assert "点一个选项" not in compact, f"{pdf.name}: a concept question asks the reader to click, on paper"


@pytest.mark.parametrize("deck", DECKS, ids=[d.stem for d in DECKS])
def test_notes_handout_holds_the_speaker_notes(pdfs, deck):
    nb = nbformat.read(deck, as_version=4)
    notes = [c.source for c in nb.cells if c.metadata.get("slideshow", {}).get("slide_type") == "notes"]
    text = run("pdftotext", str(pdfs / f"{deck.stem}-notes.pdf"), "-").replace("\n", "").replace(" ", "")
    first_words = [re.sub(r"[\s*`$_\\{}^|-]", "", n)[:8] for n in notes]
    missing_notes = [w for w in first_words if w and w not in text]
    assert len(missing_notes) <= len(notes) // 5, f"notes not in the notes handout: {missing_notes[:5]}"
    assert "演讲者备注" in text


@pytest.mark.parametrize("deck", DECKS, ids=[d.stem for d in DECKS])
def test_handout_figures_keep_their_text_alternatives(pdfs, deck):
    alts = alt_texts(pdfs / f"{deck.stem}.pdf")
    assert alts, "no tagged figures in the handout"
    assert not [a for a in alts if not a.strip() or a == PLACEHOLDER_ALT], \
        f"{sum(a == PLACEHOLDER_ALT for a in alts)} of {len(alts)} figures without a real text alternative"


def test_course_index_links_every_handout(pdfs):
    index = (SLIDES / "index.html").read_text(encoding="utf-8")
    for deck in DECKS:
        for suffix in ("", "-notes"):
            assert f'href="../handouts/{deck.stem}{suffix}.pdf"' in index
            assert (pdfs / f"{deck.stem}{suffix}.pdf").exists()
