"""Build the offline HTML slide decks and the course index (`make slides`).

    python slides/build.py [--notebooks notebooks] [--out build/slides]

For every notebooks/*.ipynb, in file-name order, this writes
<out>/<deck>.slides.html from the stored outputs (nothing is re-executed), and
<out>/index.html listing the decks with the title and goal from each deck's
title slide. reveal.js, MathJax 2.7, require.js and jQuery are copied from
node_modules/ (installed by `npm ci` from package-lock.json) into
<out>/assets/, trimmed to what the decks use, so a deck opened straight from
disk needs no network. Markdown images are embedded as data URIs.

The look comes from slides/course.css (the one course stylesheet, which the
live presenter also gets from `make lab`) and slides/reveal-settings.json
(theme, transition, scroll, slide numbers). Interactive figures keep working:
their stored HTML swaps precomputed frames without a kernel.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
SETTINGS = HERE / "reveal-settings.json"
COURSE_CSS = HERE / "course.css"

# Slides are laid out for a 1280x720 projector; reveal scales them to the window.
SLIDE_WIDTH, SLIDE_HEIGHT = 1280, 720
MATHJAX_CONFIG = "TeX-AMS_CHTML-full,Safe"

# What the decks load, relative to node_modules/. Everything else stays out.
ASSETS = {
    "reveal.js": ["dist/reveal.css", "dist/reveal.js", "plugin/notes/notes.js"],
    "requirejs": ["require.js"],
    "jquery": ["dist/jquery.min.js"],
    "mathjax": [
        "MathJax.js",
        "config/TeX-AMS_CHTML-full.js",
        "config/Safe.js",
        "extensions/*.js",
        "extensions/TeX/**/*",
        "jax/input/TeX/**/*",
        "jax/element/**/*",
        "jax/output/CommonHTML/**/*",
        "fonts/HTML-CSS/TeX/woff/**/*",
    ],
}


def die(message: str) -> None:
    sys.exit(f"make slides: {message}")


def copy_assets(node_modules: Path, out: Path, theme: str) -> None:
    if not (node_modules / "reveal.js" / "dist" / "reveal.js").exists():
        die(
            f"{node_modules} has no reveal.js. Run `npm ci` in {ROOT} "
            "(npm comes with Node.js: `apt-get install npm` or https://nodejs.org)."
        )
    assets = out / "assets"
    wanted = dict(ASSETS)
    wanted["reveal.js"] = wanted["reveal.js"] + [
        f"dist/theme/{theme}.css",
        "dist/theme/fonts/source-sans-pro/*.css",
        "dist/theme/fonts/source-sans-pro/*.woff",
    ]
    for package, patterns in wanted.items():
        base = node_modules / package
        for pattern in patterns:
            matches = [p for p in base.glob(pattern) if p.is_file()]
            if not matches:
                die(f"node_modules/{package}/{pattern} is missing; run `npm ci`.")
            for src in matches:
                dst = assets / package / src.relative_to(base)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
    shutil.copy2(COURSE_CSS, assets / "course.css")


def title_info(nb, stem: str) -> dict:
    """Title, English subtitle, goal and book section from the deck's title slide."""
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    src = first.source if first is not None else ""

    def grab(pattern: str) -> str:
        m = re.search(pattern, src, re.S | re.I)
        if not m:
            return ""
        text = re.sub(r"<[^>]+>", "", m.group(1))
        return html.unescape(" ".join(text.split()))

    title = grab(r"<h1[^>]*>(.*?)</h1>") or grab(r"^\s*#\s+(.*?)$") or stem
    return {
        "title": title,
        "subtitle": grab(r'<p class="au-subtitle">(.*?)</p>'),
        "goal": grab(r'<p class="au-goal">(.*?)</p>'),
        "source": grab(r'<p class="au-source">(.*?)</p>'),
    }


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    '<div class="au-widget-note">交互控件：在 JupyterLab 中运行本单元即可使用 · '
    "Interactive control: run this cell in JupyterLab</div>"
)


def static_widgets(nb) -> None:
    """Show each control's kernel-free form; never load a widget manager from a CDN.

    An interactive figure (`au.interactive`) stores, beside its live widget, a
    text/html form whose JavaScript swaps precomputed frames; dropping the
    widget view lets nbconvert choose that form. Any other widget would show
    its text repr ("interactive(children=..."), so it becomes a short note.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                if "text/html" not in data:
                    output["data"] = {"text/html": WIDGET_NOTE}


def hidden_source(cell) -> bool:
    """A cell shown by its output alone: its input is collapsed in JupyterLab
    (metadata.jupyter.source_hidden), which the live presenter also shows as its output
    with the code one click away. Every concept question is (tests/test_lecture_rules.py)."""
    return cell.get("metadata", {}).get("jupyter", {}).get("source_hidden", False)


def hide_collapsed_inputs(nb) -> None:
    """The offline deck shows such cells as their output only, as JupyterLab does."""
    for cell in nb.cells:
        if cell.cell_type == "code" and hidden_source(cell):
            cell.metadata["transient"] = {"remove_source": True}


def export_deck(path: Path, out: Path, settings: dict) -> dict:
    import nbformat
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    c = Config()
    c.SlidesExporter.extra_template_basedirs = [str(HERE / "templates")]
    c.SlidesExporter.template_name = "course"
    c.SlidesExporter.reveal_url_prefix = "assets/reveal.js"
    c.SlidesExporter.reveal_theme = settings.get("theme", "white")
    c.SlidesExporter.reveal_transition = settings.get("transition", "fade")
    c.SlidesExporter.reveal_scroll = bool(settings.get("scroll", False))
    c.SlidesExporter.reveal_number = str(settings.get("slideNumber") or "")
    c.SlidesExporter.reveal_width = str(SLIDE_WIDTH)
    c.SlidesExporter.reveal_height = str(SLIDE_HEIGHT)
    c.SlidesExporter.mathjax_url = f"assets/mathjax/MathJax.js?config={MATHJAX_CONFIG}"
    c.SlidesExporter.require_js_url = "assets/requirejs/require.js"
    c.SlidesExporter.jquery_url = "assets/jquery/dist/jquery.min.js"
    c.SlidesExporter.embed_images = True
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True

    nb = nbformat.read(path, as_version=4)
    static_widgets(nb)
    hide_collapsed_inputs(nb)
    exporter = SlidesExporter(config=c)
    resources = {
        "metadata": {"name": path.stem, "path": str(path.parent)},
        "reveal": {"center": bool(settings.get("center", True))},
        "course_css_url": "assets/course.css",
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    # A screen reader reads the page with a Chinese voice (nbconvert's
    # language_code takes only two-letter codes), the English subtitle in English.
    body = re.sub(r'<html lang="[^"]*">', '<html lang="zh-CN">', body, count=1)
    body = body.replace('<p class="au-subtitle">', '<p class="au-subtitle" lang="en">')
    target = out / f"{path.stem}.slides.html"
    target.write_text(body, encoding="utf-8")
    info = title_info(nb, path.stem)
    info.update(file=target.name, stem=path.stem)
    return info


INDEX = """<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>注意力机制 · 课堂幻灯片 / Attention mechanisms · slides</title>
<link rel="stylesheet" href="assets/course.css">
</head>
<body class="au-index">
<main>
<h1>注意力机制 · 课堂幻灯片</h1>
<p class="au-subtitle">Attention mechanisms · classroom slides</p>
<p>每节课一套幻灯片，按顺序排列；直接在浏览器中打开，无需联网。<br>
<span lang="en">One deck per lesson, in teaching order. They open straight from disk and need no network.</span></p>
<ol class="au-decks">
{items}
</ol>
<h2>操作 · Keys</h2>
<ul>
<li><kbd>→</kbd> / <kbd>空格 Space</kbd>：下一页 next · <kbd>←</kbd>：上一页 previous</li>
<li><kbd>S</kbd>：演讲者备注 speaker notes · <kbd>Esc</kbd>：总览 overview · <kbd>F</kbd>：全屏 full screen</li>
</ul>
<p>讲义 PDF 由 <code>make handouts</code> 生成（在 <code>build/handouts/</code>）：每页一张幻灯片；另一份每张幻灯片下附演讲者备注。<br>
<span lang="en">The PDF handouts come from <code>make handouts</code> (in <code>build/handouts/</code>): one slide per page, and a copy with each slide's speaker notes below it.</span></p>
<p>幻灯片中的滑块无需内核即可拖动；要运行或修改代码，请在 JupyterLab 中打开对应的 notebook（<code>make lab</code>）。<br>
<span lang="en">The sliders in these decks work without a kernel; to run or change the code, open the notebook in JupyterLab (<code>make lab</code>).</span></p>
</main>
</body>
</html>
"""

ITEM = """<li><a href="{file}"><span class="au-deck-title">{title}</span></a>{subtitle}
<div class="au-deck-goal">{goal}</div>{source}
<div class="au-deck-pdf">讲义 PDF <span lang="en">handouts</span>：<a href="../handouts/{stem}.pdf">幻灯片 <span lang="en">slides</span></a> ·
<a href="../handouts/{stem}-notes.pdf">含演讲者备注 <span lang="en">with speaker notes</span></a></div></li>"""


def write_index(decks: list[dict], out: Path) -> None:
    items = []
    for d in decks:
        e = {k: html.escape(v) for k, v in d.items()}
        items.append(
            ITEM.format(
                file=e["file"],
                title=e["title"],
                subtitle=f' <span class="au-deck-en" lang="en">{e["subtitle"]}</span>' if d["subtitle"] else "",
                goal=e["goal"] or e["stem"],
                stem=e["stem"],
                source=f'\n<div class="au-deck-source">{e["source"]}</div>' if d["source"] else "",
            )
        )
    (out / "index.html").write_text(INDEX.format(items="\n".join(items)), encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebooks", default=str(ROOT / "notebooks"), help="folder of NN_topic.ipynb decks")
    ap.add_argument("--out", default=str(ROOT / "build" / "slides"))
    ap.add_argument("--node-modules", default=str(ROOT / "node_modules"))
    args = ap.parse_args(argv)

    settings = json.loads(SETTINGS.read_text(encoding="utf-8"))
    notebooks = sorted(Path(args.notebooks).glob("*.ipynb"))
    if not notebooks:
        die(f"no decks (*.ipynb) in {args.notebooks}")
    out = Path(args.out).resolve()
    # Build next to the target and swap it in at the end, so that someone
    # viewing or screenshotting the decks meanwhile never sees half a build.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        copy_assets(Path(args.node_modules), tmp, settings.get("theme", "white"))
        decks = []
        for path in notebooks:
            decks.append(export_deck(path, tmp, settings))
            print(f"  {out / decks[-1]['file']}")
        write_index(decks, tmp)
        tmp.chmod(0o755)
        old = out.parent / f".{out.name}-old-{os.getpid()}"
        if out.exists():
            out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  {out / 'index.html'}  ({len(decks)} decks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
