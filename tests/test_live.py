"""The live lecture, given as a teacher gives it, in JupyterLab driven by Chromium.

One JupyterLab serves a fresh working copy of the decks (slides/lab.py, as
`make lab` does), so every notebook starts untrusted, as after a fresh clone.
For every deck:

1. Before anything runs: present it (jupyterlab-slideshow) and visit every
   slide: every image loads, no raw TeX, no widget text repr, nothing taller
   than the 720 px screen, nothing under the presenter's arrows.
2. Run All: the skipped cells (set-up, helpers, appendix) run too, and no
   cell raises. Present again, and move every control of every interactive
   figure: its picture must change. Click every option of every concept
   question: each shows its own explanation, exactly one says 正确.
3. Save (as the 2-minute autosave would): the working copy changes, and the
   repository's notebooks stay byte for byte unchanged (checked when the
   server stops, after every deck). No page errors.

Also: the URL `make lab` prints logs in, and the teacher's keys move through
slides and subslides. `make test` runs this with SLIDES_TESTS_REQUIRED=1, so a
missing browser fails instead of skipping.
"""

from __future__ import annotations

import hashlib
import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "slides"))
import browser  # noqa: E402
import lab  # noqa: E402

NOTEBOOKS = Path(os.environ.get("NOTEBOOKS", ROOT / "notebooks"))
if not NOTEBOOKS.is_absolute():
    NOTEBOOKS = ROOT / NOTEBOOKS
DECKS = sorted(NOTEBOOKS.glob("*.ipynb"))
REQUIRED = os.environ.get("SLIDES_TESTS_REQUIRED") == "1"
SHOTS = ROOT / "build" / "screenshots" / "live"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FORWARD = {"direction": "down", "alternate": "forward"}


def missing(reason: str):
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


def digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.ipynb"))}


def wait_for_server(base: str, token: str, proc, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            req = urllib.request.Request(f"{base}/api/status", headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("JupyterLab did not start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.5)


def stop(proc) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)  # the server we started, by its PID
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def chromium():
    if browser.chromium_path() is None:
        missing("chromium not installed: `make browser` (apt-get install chromium)")
    with browser.launch() as context:
        yield context


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """JupyterLab as `make lab` starts it, on a fresh working copy and a free port."""
    if not DECKS:
        pytest.skip(f"no decks in {NOTEBOOKS}")
    workdir = tmp_path_factory.mktemp("lecture")
    settings = lab.prepare(workdir, notebooks=NOTEBOOKS)
    port, token = lab.free_port(0), "t" + os.urandom(16).hex()  # 0: a random free port per worker
    extra = ["--no-browser", "--LabApp.expose_app_in_browser=True"]  # tests drive Lab's commands
    log = workdir / "lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(lab.command(workdir, port, settings, extra), stdout=out,
                                stderr=subprocess.STDOUT, env=lab.environment(workdir, token))
    base = f"http://127.0.0.1:{port}"
    before = digests(NOTEBOOKS)
    try:
        wait_for_server(base, token, proc, log)
        yield base, token, workdir
    finally:
        stop(proc)
    assert digests(NOTEBOOKS) == before, "the lecture changed a deck in the repository"


# ---------------------------------------------------------------- the page

# The cells of the presented slide, as the audience sees them.
VISIBLE_JS = r"""() => {
  const cells = [...document.querySelectorAll('.jp-Deck .jp-Notebook .jp-Cell')].filter(c => {
    const r = c.getBoundingClientRect(), st = getComputedStyle(c);
    return r.width > 0 && r.height > 0 && st.display !== 'none' && st.visibility !== 'hidden'
      && +st.opacity > 0.05;
  });
  const boxes = cells.map(c => c.getBoundingClientRect());
  const text = cells.map(c => {
    const md = [...c.querySelectorAll('.jp-RenderedMarkdown')].map(e => {
      const k = e.cloneNode(true);
      k.querySelectorAll('mjx-container, script, code, pre').forEach(x => x.remove());
      return k.textContent; }).join('\n');
    return md; }).join('\n');
  const raw = [/\$\$/, /\\\(/, /\\\[/, /\\(frac|sum|mathbf|mathrm|sqrt|top|softmax|exp|left|right)\b/,
               /\$[^$\s][^$]*\$/].map(p => text.match(p)).filter(Boolean).map(m => text.slice(Math.max(0, m.index - 20), m.index + 40));
  const images = cells.flatMap(c => [...c.querySelectorAll('img')]);
  const outputs = cells.flatMap(c => [...c.querySelectorAll('.jp-OutputArea-output')]).map(o => o.innerText || '');
  // What the presenter's navigation arrows (bottom right) would cover: text, images, canvases.
  const remote = document.querySelector('.jp-Deck-Remote-directions');
  const under = [];
  // An image counts only where it has ink under the arrows, not its white margin.
  const inkUnder = (img, R) => {
    const b = img.getBoundingClientRect(), sx = img.naturalWidth / b.width, sy = img.naturalHeight / b.height;
    const x0 = Math.max(R.left, b.left), x1 = Math.min(R.right, b.right);
    const y0 = Math.max(R.top, b.top), y1 = Math.min(R.bottom, b.bottom);
    const w = Math.max(1, Math.round((x1 - x0) * sx)), h = Math.max(1, Math.round((y1 - y0) * sy));
    const canvas = document.createElement('canvas');
    canvas.width = w; canvas.height = h;
    const ctx = canvas.getContext('2d');
    ctx.drawImage(img, (x0 - b.left) * sx, (y0 - b.top) * sy, w, h, 0, 0, w, h);
    const d = ctx.getImageData(0, 0, w, h).data;
    for (let i = 0; i < d.length; i += 4)
      if (d[i + 3] > 16 && (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235)) return true;
    return false;
  };
  if (remote) {
    // The controls a class sees: the union of the remote's visible leaves (the arrow buttons, and
    // anything else the presenter shows there). The directions box itself grows with the remote panel,
    // which jupyterlab-slideshow widens with its list of other open notebooks (course.css hides that
    // list), and is mostly empty.
    const leaves = [...remote.closest('.jp-Deck-Remote').querySelectorAll('*')].filter(e => {
      const r = e.getBoundingClientRect(), st = getComputedStyle(e);
      return e.children.length === 0 && r.width > 0 && r.height > 0 && st.visibility !== 'hidden'
        && +st.opacity > 0 && (e.tagName !== 'DIV' || (e.textContent || '').trim());
    }).map(e => e.getBoundingClientRect());
    const R = leaves.length ? {left: Math.min(...leaves.map(r => r.left)), right: Math.max(...leaves.map(r => r.right)),
                               top: Math.min(...leaves.map(r => r.top)), bottom: Math.max(...leaves.map(r => r.bottom))}
                            : remote.getBoundingClientRect();
    window.__auRemote = R;
    const hit = r => r.width > 0 && r.height > 0 && r.left < R.right && r.right > R.left
      && r.top < R.bottom && r.bottom > R.top;
    for (const c of cells) {
      const w = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
      while (w.nextNode()) {
        const n = w.currentNode;
        if (!n.nodeValue.trim() || n.parentElement.closest('mjx-assistive-mml, script, style')) continue;
        const range = document.createRange();
        range.selectNodeContents(n);
        if ([...range.getClientRects()].some(hit)) under.push(n.nodeValue.trim().slice(0, 40));
      }
      for (const e of c.querySelectorAll('img, canvas, svg, input'))
        if (hit(e.getBoundingClientRect()) && (e.tagName !== 'IMG' || inkUnder(e, R)))
          under.push('<' + e.tagName.toLowerCase() + '>');
    }
  }
  // A collapsed input (a concept question, an interactive figure's wiring) is shown by its output
  // alone while presenting (slides/course.css), not as its first line and an ellipsis.
  const collapsed = cells.flatMap(c => [...c.querySelectorAll('.jp-InputPlaceholder')])
    .filter(e => e.getBoundingClientRect().height > 0).map(e => (e.innerText || '').trim().slice(0, 40));
  return {
    under,
    collapsed,
    remote: window.__auRemote || null,
    cells: cells.map(c => jupyterapp.shell.currentWidget.content.widgets.findIndex(w => w.node === c)),
    active: jupyterapp.shell.currentWidget.content.activeCellIndex,
    top: boxes.length ? Math.min(...boxes.map(b => b.top)) : 0,
    bottom: boxes.length ? Math.max(...boxes.map(b => b.bottom)) : 0,
    broken: images.filter(i => !i.complete || !i.naturalWidth).map(i => (i.alt || i.src).slice(0, 60)),
    raw,
    reprs: outputs.filter(t => /^\s*(interactive|VBox|HBox|IntSlider|FloatSlider|Output)\(/.test(t)).map(t => t.slice(0, 60)),
    title: ((cells.map(c => c.querySelector('h1, h2, h3')).find(Boolean) || {}).innerText || '').slice(0, 40),
  };
}"""

# Let the page paint and finish its finite animations (a fragment fades in: until
# then it counts as invisible, and its height and position would be missed).
SETTLE_JS = ("await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));"
             " await Promise.all(document.getAnimations()"
             ".filter(a => a.effect && a.effect.getComputedTiming().endTime < Infinity)"
             ".map(a => a.finished.catch(() => null)));")
NO_MOTION_CSS = "*, *::before, *::after { animation-duration: 0s !important; animation-delay: 0s !important;" \
                " transition-duration: 0s !important; transition-delay: 0s !important; }"
# One round trip per step: move the presenter, let it settle, then inspect.
STEP_JS = ("async args => { await jupyterapp.commands.execute('deck:go', args); " + SETTLE_JS +
           " return (" + VISIBLE_JS + ")(); }")


# Every cell of the open notebook: type, slide type, execution count, error outputs.
CELLS_JS = """() => jupyterapp.shell.currentWidget.content.widgets.map((c, index) => {
  const m = c.model, outputs = m.type === 'code' ? m.outputs.toJSON() : [];
  return { index, type: m.type, slide_type: (m.getMetadata('slideshow') || {}).slide_type || null,
           source: !!m.sharedModel.getSource().trim(), count: m.type === 'code' ? m.executionCount : null,
           errors: outputs.filter(o => o.output_type === 'error').length };
})"""


def open_notebook(context, base: str, token: str, name: str):
    page = context.new_page()
    log = browser.watch(page, (base,))
    log.stacks = []
    page.on("pageerror", lambda exc: log.stacks.append(exc.stack))
    page.goto(f"{base}/lab/tree/notebooks/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_function("window.jupyterapp && jupyterapp.shell.currentWidget"
                           " && jupyterapp.shell.currentWidget.content && jupyterapp.shell.currentWidget.content.widgets.length",
                           timeout=60_000)
    page.evaluate("() => jupyterapp.shell.currentWidget.sessionContext.ready")
    page.wait_for_timeout(500)  # let the notebook finish rendering before presenting
    return page, log


def present_from(page, index: int) -> None:
    """Start the presenter on the slide that holds cell `index`."""
    page.evaluate("() => jupyterapp.commands.isToggled('deck:toggle') && jupyterapp.commands.execute('deck:stop')")
    page.evaluate(f"() => {{ jupyterapp.shell.currentWidget.content.activeCellIndex = {index}; }}")
    for attempt in range(3):  # the presenter loads lazily: the first start can come too early
        page.evaluate("() => jupyterapp.commands.execute('deck:start')")
        try:
            page.wait_for_selector(".jp-Deck", timeout=10_000)
            break
        except Exception:
            if attempt == 2:
                raise
    page.wait_for_timeout(400)


def inspect_slide(page) -> dict:
    page.evaluate("async () => { " + SETTLE_JS + " }")
    return page.evaluate(VISIBLE_JS)


def slide_problems(info: dict) -> list[str]:
    out = []
    if info["bottom"] - info["top"] > browser.VIEWPORT["height"]:
        out.append(f"{info['bottom'] - info['top']:.0f}px tall > 720px")
    if info["broken"]:
        out.append(f"broken image {info['broken'][:2]}")
    if info["raw"]:
        out.append(f"raw TeX {info['raw'][:2]}")
    if info["collapsed"]:
        out.append(f"collapsed input shown as a line of code {info['collapsed'][:2]}")
    if info["reprs"]:
        out.append(f"widget text repr {info['reprs'][:2]}")
    if info["under"]:
        box = info["remote"] and {k: round(v) for k, v in info["remote"].items() if k in ("left", "top", "right", "bottom")}
        out.append(f"content under the presenter's arrows {box}: {info['under'][:3]}")
    return out


def walk(page, deck: str, limit: int = 400) -> tuple[list, list]:
    """Visit every slide and fragment from the start; return (steps, problems)."""
    # Each step is judged in its final state: skip the presenter's fades (about a second a step).
    page.add_style_tag(content=NO_MOTION_CSS)
    present_from(page, 0)
    steps, problems, last, stuck = [], [], None, 0
    info = inspect_slide(page)
    for n in range(limit):
        if slide_problems(info):  # give a slow render (lazy cells, MathJax, images) a moment
            page.wait_for_timeout(800)
            info = inspect_slide(page)
        key = tuple(info["cells"])
        where = f"{deck} step {n} (cells {info['cells'][:4]}) {info['title']!r}"
        if slide_problems(info):
            problems += [f"{where}: {p}" for p in slide_problems(info)]
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{deck}-problem-step{n:03d}.png"))
        if (key, info["active"]) == last:
            stuck += 1
            if stuck == 3:
                break  # the end: going forward three times changed nothing
            page.wait_for_timeout(500)  # or a busy machine: give the presenter time
            info = page.evaluate(STEP_JS, FORWARD)
            continue
        stuck = 0
        steps.append(key)
        last = (key, info["active"])
        info = page.evaluate(STEP_JS, FORWARD)
    return steps, problems


def run_all(page, timeout_s: float = 120) -> None:
    page.evaluate("() => jupyterapp.commands.isToggled('deck:toggle') && jupyterapp.commands.execute('deck:stop')")
    page.evaluate("() => jupyterapp.shell.currentWidget.sessionContext.ready")
    page.evaluate("() => jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        """() => { const nb = jupyterapp.shell.currentWidget;
                   const k = nb.sessionContext.session && nb.sessionContext.session.kernel;
                   return k && k.status === 'idle' && nb.content.widgets.every(c => c.model.type !== 'code'
                     || (c.model.executionCount !== null && !(c.node.querySelector('.jp-InputArea-prompt')?.textContent || '').includes('*'))
                     || !c.model.sharedModel.getSource().trim()); }""",
        timeout=timeout_s * 1000, polling=500)


def interactive_cells(deck: Path) -> list[int]:
    """The cells of interactive figures (au.interactive); concept questions are widgets too."""
    nb = nbformat.read(deck, as_version=4)
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and c.metadata.get("slideshow", {}).get("slide_type") not in ("skip", "notes")
            and any(WIDGET_VIEW in o.get("data", {}) and "au-interactive" in "".join(o["data"].get("text/html", ""))
                    for o in c.get("outputs", []))]


def quiz_cells(deck: Path) -> list[int]:
    """The cells of concept questions (au.quiz, via au.load_quizzes)."""
    nb = nbformat.read(deck, as_version=4)
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and any('class="au-quiz"' in "".join(o.get("data", {}).get("text/html", "")) for o in c.get("outputs", []))]


# Clicks each option of the live concept question in cell i; returns the explanation shown after each.
QUIZ_JS = r"""async i => {
  const cell = jupyterapp.shell.currentWidget.content.widgets[i].node;
  const box = cell.querySelector('.au-quiz-live');
  const feedback = () => ((box.textContent.match(/[✓✗] (正确|不对)。.*$/) || [null])[0]);
  const shown = [];
  for (const b of box.querySelectorAll('button')) {
    const before = feedback();
    b.click();
    for (let t = 0; t < 100 && feedback() === before; t++) await new Promise(r => setTimeout(r, 100));
    shown.push(feedback() === before ? null : feedback());
  }
  return shown;
}"""


SLIDERS_JS = """i => { const cell = jupyterapp.shell.currentWidget.content.widgets[i].node;
  return { sliders: cell.querySelectorAll('.widget-slider .noUi-handle, .widget-slider input[type=range]').length,
           image: (cell.querySelector('.jupyter-widgets img') || {}).src || null }; }"""


def move_controls(page, index: int) -> list[str]:
    """Move every slider of cell `index` to both ends; the picture must change each time."""
    problems = []
    state = page.evaluate(SLIDERS_JS, index)
    if not state["sliders"] or not state["image"]:
        return [f"cell {index}: no live slider/picture after Run All ({state})"]
    handles = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".widget-slider .noUi-handle")
    for k in range(handles.count()):
        for key in ("End", "Home"):
            before = page.evaluate(SLIDERS_JS, index)["image"]
            handles.nth(k).focus()
            page.keyboard.press(key)
            try:
                page.wait_for_function(f"([i, b]) => ({SLIDERS_JS})(i).image !== b", arg=[index, before], timeout=5_000)
            except Exception:
                # At that end already (the default is the last frame): go the other way. A new
                # picture is a kernel round trip, slow on a busy machine: wait for it as above.
                page.keyboard.press("End" if key == "Home" else "Home")
                try:
                    page.wait_for_function(f"([i, b]) => ({SLIDERS_JS})(i).image !== b", arg=[index, before],
                                           timeout=5_000)
                except Exception:
                    problems.append(f"cell {index}: slider {k} moved ({key}) but its picture did not change")
    return problems


# ---------------------------------------------------------------- tests

# This file presents every other deck and tests/test_live_more.py the rest, so
# that `make test`'s two xdist workers (--dist loadfile) each give half the
# lectures, on a server of their own.
LECTURES = slice(0, None, 2)


def pytest_generate_tests(metafunc):
    if "deck" in metafunc.fixturenames:
        decks = DECKS[metafunc.module.LECTURES]
        metafunc.parametrize("deck", decks, ids=[d.stem for d in decks])


def test_live_lecture(server, chromium, deck):
    base, token, workdir = server
    page, log = open_notebook(chromium, base, token, deck.name)
    SHOTS.mkdir(parents=True, exist_ok=True)
    copy = workdir / "notebooks" / deck.name
    unrun = copy.read_bytes()  # (a slow lecture may be autosaved before step 3)
    try:
        # 1. As cloned: nothing has run and the notebook is untrusted.
        t0 = time.monotonic()
        steps, problems = walk(page, deck.stem)
        t1 = time.monotonic()
        assert len(set(steps)) > 3, f"the presenter showed only {len(set(steps))} slides of {deck.name}"
        page.screenshot(path=str(SHOTS / f"{deck.stem}-cold-last.png"))
        # 2. Run All, then present the interactive figures and move every control.
        run_all(page)
        t2 = time.monotonic()
        # The set-up and helper cells are `skip` (off the slides); Run All must still run them.
        cells = page.evaluate(CELLS_JS)
        not_run = [c["index"] for c in cells if c["type"] == "code" and c["slide_type"] == "skip"
                   and c["source"] and c["count"] is None]
        assert not_run == [], f"Run All did not run the skipped cells {not_run}"
        assert any(c["slide_type"] == "skip" and c["type"] == "code" for c in cells), \
            "no skipped code cell: the set-up cell should be off the slides"
        failed = [c["index"] for c in cells if c["errors"]]
        assert failed == [], f"cells raised errors after Run All: {failed}"
        for index in interactive_cells(deck):
            present_from(page, index)
            info = page.evaluate(VISIBLE_JS)
            if index not in info["cells"]:
                problems.append(f"cell {index}: not on the presented slide ({info['cells']})")
            if info["bottom"] - info["top"] > browser.VIEWPORT["height"]:
                problems.append(f"cell {index}: live slide {info['bottom'] - info['top']:.0f}px tall > 720px")
            problems += move_controls(page, index)
            page.screenshot(path=str(SHOTS / f"{deck.stem}-cell{index:03d}.png"))
        # Every option of every concept question explains itself live, too.
        page.evaluate("() => jupyterapp.commands.isToggled('deck:toggle') && jupyterapp.commands.execute('deck:stop')")
        for index in quiz_cells(deck):
            shown = page.evaluate(QUIZ_JS, index)
            if len(shown) < 2 or None in shown or len(set(shown)) != len(shown) \
                    or sum(t.startswith("✓") for t in shown) != 1:
                problems.append(f"cell {index}: the live question's options explained {shown}")
        print(f"{deck.stem}: {len(steps)} steps presented in {t1 - t0:.0f} s, Run All {t2 - t1:.0f} s,"
              f" controls {time.monotonic() - t2:.0f} s")
        # 3. Save, as JupyterLab's autosave would: only the working copy changes.
        page.evaluate("() => jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
        assert copy.read_bytes() != unrun, "saving after the lecture did not reach the working copy"
        assert deck.read_bytes() != copy.read_bytes()
        # 4. Nothing printed a widget repr anywhere in the run notebook.
        reprs = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output')]
            .map(o => o.innerText || '').filter(t => /^\\s*(interactive|VBox|HBox)\\(/.test(t)).length""")
        if reprs:
            problems.append(f"{reprs} widget text reprs after Run All")
    finally:
        page.close()
    assert log.errors == [], f"page errors: {log.errors[:5]}\n" + "\n".join(log.stacks[:2])
    assert log.external == [], f"requests that would leave the machine: {log.external[:5]}"
    assert interactive_cells(deck), f"{deck.name} has no interactive figure (au.interactive)"
    assert not problems, "\n".join(problems[:25])


def test_teacher_keys_walk_slides_and_subslides(server, chromium):
    """Space and → go forward through subslides too; ← and shift+space go back, even after a click.

    The presenter steps cell by cell: on a slide with code, one press selects
    the code cell (so Shift+Enter runs it) and the next moves on.
    """
    base, token, _ = server
    deck = DECKS[0]
    nb = nbformat.read(deck, as_version=4)
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells]
    page, log = open_notebook(chromium, base, token, deck.name)
    active = "() => jupyterapp.shell.currentWidget.content.activeCellIndex"
    try:
        present_from(page, 0)
        page.locator(".jp-Deck .jp-Cell:visible").first.click()  # the teacher clicks inside the slide
        path = [page.evaluate(active)]
        for key in ["ArrowRight", "Space", "PageDown"] * 6:
            page.keyboard.press(key)
            page.wait_for_timeout(200)
            path.append(page.evaluate(active))
            assert path[-1] > path[-2], f"{key} did not move forward: cells {path}"
        reached = {kinds[i] for i in path}
        assert "subslide" in reached, f"the forward keys skipped every subslide: cells {path}"
        for key in ["ArrowLeft", "Shift+Space", "PageUp"]:
            before = page.evaluate(active)
            page.keyboard.press(key)
            page.wait_for_timeout(200)
            assert page.evaluate(active) < before, f"{key} did not go back from cell {before}"
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
        assert not page.evaluate("() => !!document.querySelector('.jp-Deck')"), "Escape did not stop presenting"
    finally:
        page.close()
    assert log.errors == []


def test_printed_url_logs_in(tmp_path):
    """`make lab` (slides/lab.py) prints a URL with a working token; without it the server refuses."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "slides" / "lab.py"), "--dir", str(tmp_path),
                             "--port", "0", "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, lines = None, []
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            m = re.search(r"(http://127\.0\.0\.1:\d+/lab/tree/notebooks\?token=([0-9a-f]{48}))\s*$", line)
            if m:
                url, token = m.group(1), m.group(2)
        assert url, "no URL with a 48-hex-digit token printed:\n" + "".join(lines)
        base = url.split("/lab/")[0]
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        deadline = time.monotonic() + 90
        while True:
            try:
                with opener.open(url, timeout=5) as r:
                    assert r.status == 200 and "JupyterLab" in r.read().decode("utf-8", "replace")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "the printed URL never answered"
                time.sleep(0.5)
        with opener.open(f"{base}/api/contents/notebooks", timeout=5) as r:  # logged in by the cookie
            assert r.status == 200
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{base}/api/contents/notebooks", timeout=5)  # no token, no cookie
        if Path(f"/proc/{proc.pid}/cmdline").exists():  # Linux: the token is not on the command line
            assert token not in Path(f"/proc/{proc.pid}/cmdline").read_text()
        assert (tmp_path / "notebooks").is_dir() and list((tmp_path / "notebooks").glob("*.ipynb"))
    finally:
        stop(proc)
