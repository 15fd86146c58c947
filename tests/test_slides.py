"""Browser tests of the exported slides: every deck offline, its controls moved without a kernel.

The live lecture in JupyterLab is tested in tests/test_live.py.

Run by `make test`, which first runs `make slides` and installs Debian's
chromium where it is missing. Run alone, these tests rebuild stale decks
themselves and skip (with the reason) when chromium or node_modules is missing;
with SLIDES_TESTS_REQUIRED=1 (set by `make test`) they fail instead.

Screenshots of the first slides of every deck go to build/screenshots/first-slides/.
For every slide of a deck use `make screenshots DECK=<deck>`.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "slides"))
import browser  # noqa: E402
import build  # noqa: E402

NOTEBOOKS = Path(os.environ.get("NOTEBOOKS", ROOT / "notebooks"))
if not NOTEBOOKS.is_absolute():
    NOTEBOOKS = ROOT / NOTEBOOKS
SLIDES = ROOT / "build" / "slides"
HANDOUTS = ROOT / "build" / "handouts"
SHOTS = ROOT / "build" / "screenshots" / "first-slides"
DECKS = sorted(NOTEBOOKS.glob("*.ipynb"))
FIRST_SLIDES = 3  # screenshots per deck saved by the tests
REQUIRED = os.environ.get("SLIDES_TESTS_REQUIRED") == "1"
ACCENT = "rgb(31, 95, 168)"  # --au-accent in notebooks/rise.css: proves the course stylesheet is in use


def missing(reason: str):
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


def deck_ids(paths):
    return [p.stem for p in paths]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def built():
    """build/slides/ up to date with every deck (rebuilt here if stale)."""
    if not DECKS:
        pytest.skip(f"no decks in {NOTEBOOKS}")
    tools = [ROOT / "slides" / "build.py", ROOT / "slides" / "course.css", *(ROOT / "slides" / "templates").rglob("*")]
    newest_tool = max(t.stat().st_mtime for t in tools if t.is_file())
    stale = [
        p for p in DECKS
        if not (SLIDES / f"{p.stem}.slides.html").exists()
        or (SLIDES / f"{p.stem}.slides.html").stat().st_mtime < max(p.stat().st_mtime, newest_tool)
    ]
    if stale or not (SLIDES / "index.html").exists():
        if not (ROOT / "node_modules" / "reveal.js").exists():
            missing("node_modules/ missing: run `make slides` (needs npm)")
        build.main(["--notebooks", str(NOTEBOOKS), "--out", str(SLIDES)])
    return SLIDES


@pytest.fixture(scope="session")
def chromium():
    if browser.chromium_path() is None:
        missing("chromium not installed: `make browser` (apt-get install chromium)")
    with browser.launch() as context:
        yield context


# ---------------------------------------------------------------- the decks' contract with the tooling


@pytest.mark.parametrize("deck", DECKS, ids=deck_ids(DECKS))
def test_title_slide_and_no_per_deck_rise_settings(deck):
    """The title slide uses the shared markup; styles and RISE settings live in one shared place."""
    nb = nbformat.read(deck, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown", "the title slide is the first cell, markdown"
    for part in ('<div class="au-title">', "<h1>", 'class="au-subtitle"', 'class="au-goal"', 'class="au-source"'):
        assert part in first.source, f"title slide lacks {part}"
    assert "style=" not in first.source, "no inline styles: the title style lives in notebooks/rise.css"
    assert not {"rise", "livereveal"} & set(nb.metadata), (
        "RISE settings are shared (slides/rise-settings.json); a per-deck `rise` key would override them"
    )


# ---------------------------------------------------------------- static decks, no browser


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]


def test_every_src_and_href_stays_inside_the_build(built):
    pages = sorted(built.glob("*.html"))
    assert {p.name for p in pages} >= {"index.html"} | {f"{d.stem}.slides.html" for d in DECKS}
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for url in parser.urls:
            if url.startswith(("#", "data:")):
                continue
            assert not re.match(r"^([a-z][a-z0-9+.-]*:|//|/)", url, re.I), f"{page.name}: {url} leaves the build"
            target = (page.parent / url.split("?")[0].split("#")[0]).resolve()
            if target.is_relative_to(HANDOUTS.resolve()):  # the PDFs: tests/test_handouts.py
                assert page.name == "index.html" and target.suffix == ".pdf", f"{page.name}: {url}"
                continue
            assert target.is_relative_to(built.resolve()), f"{page.name}: {url} points outside build/slides"
            assert target.exists(), f"{page.name}: {url} does not exist"
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    for cdn in ("unpkg.com", "cdnjs", "jsdelivr", "mermaid", "googleapis"):
        assert cdn not in text, f"{cdn} in the exported HTML"


def test_index_lists_every_deck_in_order_with_title_and_goal(built):
    index = (built / "index.html").read_text(encoding="utf-8")
    positions = []
    for deck in DECKS:
        info = build.title_info(nbformat.read(deck, as_version=4), deck.stem)
        assert f'href="{deck.stem}.slides.html"' in index
        assert info["title"] in index and info["goal"] and info["goal"] in index
        positions.append(index.index(f'href="{deck.stem}.slides.html"'))
    assert positions == sorted(positions)
    assert "课堂幻灯片" in index and "classroom slides" in index


def test_mathjax_is_trimmed(built):
    size = sum(f.stat().st_size for f in (built / "assets" / "mathjax").rglob("*") if f.is_file())
    assert size < 5_000_000, f"MathJax copy is {size / 1e6:.1f} MB"


# ---------------------------------------------------------------- static decks in Chromium, offline


# Moves every range input of every offline interactive figure to each end and
# back; returns the ones whose picture did not change.
MOVE_JS = r"""() => {
  const bad = [];
  document.querySelectorAll('.au-interactive[data-ready]').forEach((root, n) => {
    const img = root.querySelector('img.au-frame');
    root.querySelectorAll('input[type=range]').forEach((input, k) => {
      const start = input.value;
      for (const v of [input.max, input.min]) {
        if (String(v) === String(input.value)) continue;
        const before = img.src;
        input.value = v;
        input.dispatchEvent(new Event('input'));
        if (img.src === before) bad.push(`figure ${n} control ${k}: picture unchanged at ${v}`);
      }
      input.value = start;
      input.dispatchEvent(new Event('input'));
    });
    if (!root.querySelectorAll('input[type=range]').length) bad.push(`figure ${n}: no controls`);
  });
  return bad;
}"""


def move_offline_controls(page) -> list[str]:
    return page.evaluate(MOVE_JS)


@pytest.mark.parametrize("deck", DECKS, ids=deck_ids(DECKS))
def test_static_deck_offline(built, chromium, deck):
    page, log = browser.open_static_deck(chromium, built / f"{deck.stem}.slides.html")
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = []
    size = (built / f"{deck.stem}.slides.html").stat().st_size
    assert size < 8_000_000, f"{deck.stem}.slides.html is {size / 1e6:.1f} MB"
    try:
        config = page.evaluate("(() => { const c = Reveal.getConfig(); return [c.width, c.height]; })()")
        assert config == [build.SLIDE_WIDTH, build.SLIDE_HEIGHT]
        assert page.evaluate("Reveal.hasPlugin('notes')"), "speaker notes plugin missing"
        nb = nbformat.read(deck, as_version=4)
        notes = sum(c.metadata.get("slideshow", {}).get("slide_type") == "notes" for c in nb.cells)
        assert page.evaluate("document.querySelectorAll('aside.notes').length") == notes, "speaker notes lost"
        widgets = sum("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                      and "au-interactive" in "".join(o["data"].get("text/html", ""))
                      for c in nb.cells if c.cell_type == "code"
                      and c.metadata.get("slideshow", {}).get("slide_type") not in ("skip", "notes")
                      for o in c.outputs)
        assert widgets, "the deck has no interactive figure"
        assert page.evaluate("document.querySelectorAll('.au-widget-note').length") == 0, "a control without a kernel-free form"
        assert page.evaluate("document.querySelectorAll('.au-interactive[data-ready]').length") == widgets, \
            "an interactive figure's offline control did not start"
        problems += move_offline_controls(page)
        slides = page.evaluate(browser.SLIDES_JS)
        assert len(slides) > 1
        for n, (h, v) in enumerate(slides, start=1):
            info = browser.goto_slide(page, h, v)
            where = f"slide {n} ({h}.{v}) {info['title'][:40]!r}"
            if info["height"] > info["maxHeight"]:
                problems.append(f"{where}: {info['height']}px tall > {info['maxHeight']}px")
            if info["untypeset"]:
                problems.append(f"{where}: math not typeset: {info['untypeset'][:3]}")
            if info["raw"]:
                problems.append(f"{where}: raw TeX left in the text: {info['raw'][:3]}")
            if info["errors"]:
                problems.append(f"{where}: TeX errors: {info['errors'][:3]}")
            if n == 1:
                color = page.evaluate("getComputedStyle(document.querySelector('.au-title h1')).color")
                assert color == ACCENT, "title slide is not styled by notebooks/rise.css"
            if n <= FIRST_SLIDES:
                page.screenshot(path=str(SHOTS / f"{deck.stem}-{n:02d}.png"))
    finally:
        page.close()
    assert log.external == [], f"{len(log.external)} requests would have left the machine: {log.external[:5]}"
    assert log.failed == [], f"missing files: {log.failed[:5]}"
    assert log.errors == [], f"page errors: {log.errors[:5]}"
    assert not problems, "\n".join(problems) + f"\n(see `make screenshots DECK={deck.stem}`)"


def test_speaker_view_opens_offline(built, chromium):
    """Reveal's speaker view (key S) works from disk and shows the deck's notes."""
    deck = next((d for d in DECKS if any(c.metadata.get("slideshow", {}).get("slide_type") == "notes"
                                         for c in nbformat.read(d, as_version=4).cells)), None)
    if deck is None:
        pytest.skip("no deck has speaker notes yet")
    page, log = browser.open_static_deck(chromium, built / f"{deck.stem}.slides.html")
    try:
        first_note = page.evaluate("document.querySelector('aside.notes').textContent.trim().slice(0, 20)")
        page.evaluate("Reveal.slide(Reveal.getIndices(document.querySelector('aside.notes').closest('section')).h,"
                      " Reveal.getIndices(document.querySelector('aside.notes').closest('section')).v)")
        with chromium.expect_page() as popup:
            page.keyboard.press("s")
        speaker = popup.value
        speaker.wait_for_function(f"document.body.innerText.includes({json.dumps(first_note)})", timeout=15_000)
        speaker.close()
    finally:
        page.close()
    assert log.external == [] and log.errors == []


# ---------------------------------------------------------------- accessibility (axe-core, offline)

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
PLACEHOLDER_ALT = "No description has been provided for this image"
# axe-core over the whole document; every slide is laid out at once in reveal's
# print layout, so one run covers every slide, fragments included.
AXE_JS = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + ' ' + n.html.slice(0, 80))}));
}"""


@pytest.mark.parametrize("deck", DECKS, ids=deck_ids(DECKS))
def test_offline_deck_is_accessible(built, chromium, deck):
    """0 critical and 0 serious axe-core violations on every slide; Chinese declared; real alt texts."""
    import handouts

    if not AXE.exists():
        missing("node_modules/axe-core missing: run `make slides` (npm ci)")
    html = built / f"{deck.stem}.slides.html"
    page, log = handouts.open_for_print(chromium, html, notes=False)
    try:
        page.evaluate(handouts.LAST_PAGE_JS)  # every slide visible to assistive technology
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        assert page.evaluate("[...document.querySelectorAll('.au-subtitle')].every(e => e.lang === 'en')")
        images = page.evaluate("[...document.querySelectorAll('.reveal .slides img')].map(i => i.getAttribute('alt'))")
        assert images, "no images in the deck"
        placeholders = [a for a in images if not (a or "").strip() or a == PLACEHOLDER_ALT]
        assert not placeholders, f"{len(placeholders)} of {len(images)} images without a real text alternative"
        page.add_script_tag(path=str(AXE))
        violations = page.evaluate(AXE_JS)
    finally:
        page.close()
    by_impact = {}
    for v in violations:
        by_impact.setdefault(v["impact"], []).append(v)
    counts = {impact: sum(len(v["nodes"]) for v in vs) for impact, vs in by_impact.items()}
    print(f"{deck.stem}: axe-core violations by impact {counts or 'none'}")
    for v in by_impact.get("moderate", []) + by_impact.get("minor", []):
        print(f"  {v['impact']}: {v['id']} ({v['help']}) x{len(v['nodes'])}: {v['nodes'][:2]}")
    severe = by_impact.get("critical", []) + by_impact.get("serious", [])
    assert not severe, "\n".join(f"{v['impact']} {v['id']}: {v['help']} x{len(v['nodes'])} {v['nodes'][:3]}"
                                 for v in severe)
    assert log.external == [] and log.errors == []


# Moves the first offline slider of the current slide with the keyboard; returns what changed.
KEYBOARD_JS = """async () => {
  const root = Reveal.getCurrentSlide().querySelector('.au-interactive[data-ready]');
  const input = root.querySelector('input[type=range]');
  const img = root.querySelector('img.au-frame');
  const live = root.querySelector('[aria-live]');
  const label = input.closest('label');
  input.focus();
  return {name: input.labels.length ? input.labels[0].innerText : input.getAttribute('aria-label'),
          visible: !!label && label.getBoundingClientRect().height > 0,
          src: img.src, alt: img.alt, live: live ? live.textContent : null, value: input.value,
          max: input.max, focused: document.activeElement === input};
}"""


@pytest.mark.parametrize("deck", DECKS, ids=deck_ids(DECKS))
def test_offline_sliders_work_with_the_keyboard_and_announce(built, chromium, deck):
    """Every offline slider has a visible label and a name, moves with the arrow keys, and says its new setting."""
    page, log = browser.open_static_deck(chromium, built / f"{deck.stem}.slides.html")
    problems = []
    try:
        slides = page.evaluate("""() => [...document.querySelectorAll('.au-interactive[data-ready]')].map(r => {
            const s = r.closest('section'); const i = Reveal.getIndices(s); return [i.h, i.v || 0]; })""")
        assert slides, "no offline interactive figure"
        for h, v in slides:
            browser.goto_slide(page, h, v)
            before = page.evaluate(KEYBOARD_JS)
            if not (before["name"] or "").strip() or not before["visible"]:
                problems.append(f"slide {h}.{v}: a slider without a visible label / accessible name")
            key = "ArrowLeft" if before["value"] == before["max"] else "ArrowRight"
            page.keyboard.press(key)
            after = page.evaluate(KEYBOARD_JS)
            if after["value"] == before["value"] or after["src"] == before["src"]:
                problems.append(f"slide {h}.{v}: {key} did not move the slider and its picture")
            if after["live"] is None or after["live"] == before["live"]:
                problems.append(f"slide {h}.{v}: the new setting is not announced (aria-live)")
            if after["alt"] == before["alt"]:
                problems.append(f"slide {h}.{v}: the picture's text alternative did not follow the slider")
    finally:
        page.close()
    assert not problems, "\n".join(problems)
    assert log.errors == []


# Clicks every option of every offline concept question; returns what each click showed.
QUIZ_JS = """() => [...document.querySelectorAll('.au-quiz[data-ready]')].map(root => {
  const at = Reveal.getIndices(root.closest('section'));
  Reveal.slide(at.h, at.v || 0);                       // measured on its own slide, as projected
  const buttons = [...root.querySelectorAll('button.au-quiz-option')];
  const feedback = root.querySelector('.au-quiz-feedback');
  return buttons.map(b => { b.click(); return {pressed: b.getAttribute('aria-pressed'), text: feedback.textContent,
                                               bottom: feedback.getBoundingClientRect().bottom}; });
})"""


@pytest.mark.parametrize("deck", DECKS, ids=deck_ids(DECKS))
def test_offline_concept_questions_explain_every_option(built, chromium, deck):
    """Every option of every concept question, clicked offline, shows its own explanation and verdict."""
    page, log = browser.open_static_deck(chromium, built / f"{deck.stem}.slides.html")
    try:
        quizzes = page.evaluate(QUIZ_JS)
        code_shown = page.evaluate("[...document.querySelectorAll('.jp-Cell')].filter(c => c.querySelector("
                                   "'.au-quiz') && c.querySelector('.jp-InputArea')).length")
    finally:
        page.close()
    assert len(quizzes) >= 3, f"{len(quizzes)} concept questions in the offline deck"
    for n, clicks in enumerate(quizzes):
        texts = [c["text"] for c in clicks]
        assert all(c["pressed"] == "true" for c in clicks), f"question {n}: a clicked option is not marked"
        assert all(t.startswith(("✓ 正确。", "✗ 不对。")) for t in texts), f"question {n}: {texts}"
        assert sum(t.startswith("✓") for t in texts) == 1, f"question {n}: not exactly one right option"
        assert len(set(texts)) == len(texts), f"question {n}: two options share an explanation"
        tallest = max(c["bottom"] for c in clicks)     # the explanation must fit on the 720 px slide
        assert tallest <= browser.VIEWPORT["height"], f"question {n}: an explanation ends at {tallest:.0f}px"
    assert code_shown == 0, "a quiz cell's source (with its answers) is shown on a slide"
    assert log.errors == [] and log.external == []


@pytest.mark.parametrize("deck", DECKS, ids=deck_ids(DECKS))
def test_collapsed_cells_show_only_their_output(built, chromium, deck):
    """A cell collapsed in JupyterLab (jupyter.source_hidden) or holding a concept question shows
    its output without its code, as the live presenter does (slides/course.css); every other
    shown code cell keeps its code."""
    nb = nbformat.read(deck, as_version=4)
    shown = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()
             and c.metadata.get("slideshow", {}).get("slide_type") not in ("skip", "notes")]
    expected = {c.id: not build.hidden_source(c) for c in shown}
    page, log = browser.open_static_deck(chromium, built / f"{deck.stem}.slides.html")
    try:
        found = page.evaluate("""ids => Object.fromEntries(ids.map(id => {
            const cell = document.getElementById('cell-id=' + id);
            return [id, cell ? !!cell.querySelector('.jp-InputArea') : null]; }))""", list(expected))
    finally:
        page.close()
    assert None not in found.values(), f"shown cells missing from the offline deck: " \
        f"{[k for k, v in found.items() if v is None]}"
    wrong = {k: ("code shown" if v else "code missing") for k, v in found.items() if v != expected[k]}
    assert not wrong, f"cells whose code is shown or hidden against the notebook: {wrong}"
    assert log.errors == []
