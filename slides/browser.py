"""Headless Chromium helpers shared by tests/test_slides.py and slides/screenshots.py.

Chromium is Debian's `chromium` (never a Playwright download); Playwright's
Python package drives it through `executable_path`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

VIEWPORT = {"width": 1280, "height": 720}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


@contextlib.contextmanager
def launch():
    """A Playwright Chromium browser with a fresh profile, closed afterwards."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError("Chromium not found: `apt-get install -y chromium` (or set CHROMIUM=/path/to/chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=exe,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport=VIEWPORT,
            device_scale_factor=1,
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class PageLog:
    """What a page did: requests that would have left the machine, errors."""

    external: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)


def watch(page, allowed_prefixes: tuple[str, ...]) -> PageLog:
    """Abort and record every request whose URL does not start with an allowed prefix."""
    log = PageLog()

    def route(r):
        url = r.request.url
        if url.startswith(allowed_prefixes) or url.startswith(("data:", "blob:", "about:")):
            r.continue_()
        else:
            log.external.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda exc: log.errors.append(str(exc)))
    page.on("console", lambda m: m.type == "error" and log.console_errors.append(m.text))
    page.on(
        "requestfailed",
        lambda req: req.url.startswith(allowed_prefixes) and log.failed.append(f"{req.url} ({req.failure})"),
    )
    return log


def open_static_deck(context, html: Path):
    """Open an exported deck from disk (network blocked); wait for reveal.js and MathJax."""
    page = context.new_page()
    log = watch(page, ("file://",))
    page.goto(html.resolve().as_uri())
    page.wait_for_function("window.Reveal && Reveal.isReady && Reveal.isReady()", timeout=30_000)
    page.wait_for_function("window.MathJax && MathJax.isReady", timeout=30_000)
    page.evaluate("() => new Promise(done => MathJax.Hub.Queue(done))")
    # Final state of every slide: all fragments shown, no animation in screenshots.
    page.evaluate("Reveal.configure({transition: 'none', fragments: false})")
    return page, log


# Runs in the page: the leaf slides (a section without nested sections) in order.
SLIDES_JS = """() => Reveal.getSlides().map(s => { const i = Reveal.getIndices(s); return [i.h, i.v || 0]; })"""

# Runs in the page on the current slide: layout height, width, and math problems.
INSPECT_JS = r"""() => {
  const slide = Reveal.getCurrentSlide();
  const skip = new Set(['SCRIPT', 'STYLE', 'CODE', 'PRE', 'TEXTAREA']);
  const raw = [];
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT, {
    acceptNode(n) {
      for (let e = n.parentElement; e && e !== slide; e = e.parentElement) {
        if (skip.has(e.tagName) || e.classList.contains('MathJax_CHTML') || e.classList.contains('MathJax_Preview')
            || e.tagName === 'MJX-CONTAINER' || e.classList.contains('jp-OutputArea') || e.classList.contains('jp-InputArea-editor'))
          return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }});
  let text = '';
  while (walker.nextNode()) text += walker.currentNode.nodeValue;
  for (const pat of [/\$\$/, /\\\(/, /\\\[/, /\\[a-zA-Z]{2,}/, /\$[^$\s][^$]*\$/]) {
    const m = text.match(pat);
    if (m) raw.push(text.slice(Math.max(0, m.index - 30), m.index + 40));
  }
  // Speaker notes are hidden on the slide (display: none), so their math has no size.
  const scripts = [...slide.querySelectorAll('script[type^="math/tex"]')].filter(s => !s.closest('aside.notes'));
  const untypeset = scripts.filter(s => { const f = document.getElementById(s.id + '-Frame');
    return !f || !f.childElementCount || f.closest('.MJXc-processing, .MJXc-processed')
      || !f.getBoundingClientRect().width; }).map(s => s.textContent.slice(0, 60));
  const errors = [...slide.querySelectorAll('.noError, .MathJax_Error, [class*="merror"], mjx-merror')]
    .map(e => e.textContent.slice(0, 80));
  const cfg = Reveal.getConfig();
  return {
    indices: Reveal.getIndices(),
    height: slide.scrollHeight, width: slide.scrollWidth,
    maxHeight: cfg.height, maxWidth: cfg.width,
    math: scripts.length, untypeset, errors, raw,
    title: ((slide.querySelector('h1, h2, h3') || {}).innerText || '').replace(/¶/g, '').replace(/\s+/g, ' ').trim(),
  };
}"""


# Every math script on the current slide has a finished, non-empty rendering.
TYPESET_JS = """() => {
  const slide = Reveal.getCurrentSlide();
  if (slide.querySelector('.MJXc-processing, .MJXc-processed')) return false;
  return [...slide.querySelectorAll('script[type^="math/tex"]')].filter(s => !s.closest('aside.notes')).every(s => {
    const f = document.getElementById(s.id + '-Frame');
    return f && f.childElementCount > 0 && f.getBoundingClientRect().width > 0;
  });
}"""


def goto_slide(page, h: int, v: int, timeout_ms: int = 10_000) -> dict:
    """Show slide (h, v), wait until its math is typeset (or time out), and inspect it."""
    page.evaluate("([h, v]) => Reveal.slide(h, v)", [h, v])
    # The deck re-renders the visible slide's math after each change (as
    # nbconvert's template does); wait for that to finish.
    try:
        page.wait_for_function(TYPESET_JS, timeout=timeout_ms, polling=50)
    except Exception:  # reported by INSPECT_JS as untypeset math
        pass
    return page.evaluate(INSPECT_JS)
