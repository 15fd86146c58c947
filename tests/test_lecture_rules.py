"""The lecture rules of DECKS.md, checked on every stored deck (no kernel needed).

A teacher presents the shown cells (every slide type but ``skip`` and
``notes``) to a class in 45 minutes on a 1280x720 screen:

* the lecture is at most 32 pages (slides + subslides);
* a shown code cell is teaching code: at most 12 non-blank lines, none
  longer than 100 characters (JupyterLab does not wrap them), and no set-up
  or plumbing (imports, magics, seeds, print options, helper definitions);
* every figure on a slide is readable from the back row: all its text at
  least ``au.MIN_TEXT_PX`` tall as displayed, no legend over data, and the
  frames of an interactive figure the same size with the same axes.

The figure checks read the report that attention_utils writes into every PNG
it renders (``au:min_text_pt`` and friends, see ``au._figure_report``); a PNG
without it was not drawn in the course style and fails.
"""

import base64
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

import attention_utils as au

DECKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_PAGES = 32
MAX_CODE_LINES = 12
MAX_LINE_CHARS = 100
FRAME_URI = re.compile(r"data:image/png;base64,([A-Za-z0-9+/=]+)")
# Set-up and plumbing that belongs in a skipped cell or in the module.
PLUMBING = {
    "an import": re.compile(r"^\s*(import\s|from\s+\S+\s+import\s)", re.M),
    "a magic": re.compile(r"^\s*%", re.M),
    "a seed": re.compile(r"manual_seed|np\.random\.seed|random\.seed"),
    "print options": re.compile(r"set_printoptions|set_num_threads|set_default_dtype"),
    "figure settings": re.compile(r"rcParams|InlineBackend"),
    "a definition": re.compile(r"^\s*(@\w|def\s|class\s)", re.M),
}


def source(cell):
    return "".join(cell["source"])


def slide_type(cell):
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type")


def shown(cell):
    return slide_type(cell) not in ("skip", "notes")


def label(index, cell):
    first = source(cell).strip().splitlines()[0][:60] if source(cell).strip() else ""
    return f"cell {index} ({first!r})"


@pytest.fixture(params=DECKS, ids=[d.stem for d in DECKS])
def deck(request):
    return json.loads(request.param.read_text(encoding="utf-8"))


def shown_code(deck):
    return [(i, c) for i, c in enumerate(deck["cells"])
            if c["cell_type"] == "code" and source(c).strip() and shown(c)]


def test_there_are_decks():
    assert DECKS


def test_lecture_fits_a_45_minute_class(deck):
    pages = sum(slide_type(c) in ("slide", "subslide") for c in deck["cells"])
    assert pages <= MAX_PAGES, (f"{pages} pages (slides + subslides) in the lecture; at most "
                                f"{MAX_PAGES}: move deeper material to the 自学附录 (skip cells)")


def test_shown_code_fits_the_slide(deck):
    problems = []
    for i, c in shown_code(deck):
        lines = source(c).splitlines()
        filled = [line for line in lines if line.strip()]
        if len(filled) > MAX_CODE_LINES:
            problems.append(f"{label(i, c)}: {len(filled)} non-blank lines (at most {MAX_CODE_LINES})")
        for line in lines:
            if len(line) > MAX_LINE_CHARS:
                problems.append(f"{label(i, c)}: a {len(line)}-character line runs off the slide: "
                                f"{line[:50]!r}...")
    assert not problems, "\n".join(problems)


def test_no_setup_or_plumbing_on_a_slide(deck):
    problems = [f"{label(i, c)}: {what} on a slide (move it to a skip cell or the module)"
                for i, c in shown_code(deck)
                for what, pattern in PLUMBING.items() if pattern.search(source(c))]
    assert not problems, "\n".join(problems)


def test_concept_questions_show_as_their_buttons(deck):
    """A concept question's cell is collapsed (jupyter.source_hidden): live and offline the class
    sees its question and buttons, not the line of code that shows it (slides/course.css)."""
    shown_code_lines = [label(i, c) for i, c in shown_code(deck)
                        if any('class="au-quiz"' in "".join(o.get("data", {}).get("text/html", ""))
                               for o in c.get("outputs", []))
                        and not c.get("metadata", {}).get("jupyter", {}).get("source_hidden")]
    assert not shown_code_lines, "concept questions with their code on the slide: " + ", ".join(shown_code_lines)


def test_setup_cell_is_off_the_slides_and_seeds(deck):
    """The set-up cell is skipped: the live presenter runs it on Run All (tests/test_live.py)."""
    setup = next(c for c in deck["cells"] if c["cell_type"] == "code")
    assert slide_type(setup) == "skip"
    assert "import attention_utils as au" in source(setup)
    assert "manual_seed" in source(setup)


def test_decks_leave_font_sizes_to_the_course_style(deck):
    """One figure style, set in attention_utils; a deck never sets its own font sizes."""
    pattern = re.compile(r"fontsize|font\.size|set_size\(|labelsize|rcParams")
    offenders = [label(i, c) for i, c in enumerate(deck["cells"])
                 if c["cell_type"] == "code" and pattern.search(source(c))]
    assert not offenders, "font sizes set in the deck: " + ", ".join(offenders)


# ---------------------------------------------------------------- figures


def shown_pngs(deck):
    """(where, png bytes, frames group or None) of every image a slide shows."""
    for i, c in enumerate(deck["cells"]):
        if not shown(c):
            continue
        for name, bundle in c.get("attachments", {}).items():
            if "image/png" in bundle:
                yield f"{label(i, c)} attachment {name}", base64.b64decode(bundle["image/png"]), None
        for k, output in enumerate(c.get("outputs", [])):
            data = output.get("data", {})
            if "image/png" in data:
                yield f"{label(i, c)} output {k}", base64.b64decode(data["image/png"]), None
            html = "".join(data.get("text/html", ""))
            if "au-interactive" in html:
                spec = re.search(r'<script type="application/json" class="au-frames">(.*?)</script>',
                                 html, re.S)
                frames = json.loads(spec.group(1).replace("<\\/", "</"))["frames"]
                for f, uri in enumerate(frames):
                    png = base64.b64decode(FRAME_URI.match(uri).group(1))
                    yield f"{label(i, c)} interactive frame {f}", png, (i, k)


def report(png):
    image = Image.open(io.BytesIO(png))
    text = image.text
    if "au:min_text_pt" not in text:
        return None
    dpi = image.info.get("dpi", (72, 72))[0]
    width, height = image.size
    return {"size": (width, height),
            "text_px": au._displayed_text_px(float(text["au:min_text_pt"]), dpi, width, height),
            "legend_overlaps": int(text["au:legend_overlaps"]),
            "axes_limits": json.loads(text["au:axes_limits"])}


def test_every_figure_on_a_slide_is_readable_from_the_back_row(deck):
    problems = []
    for where, png, _ in shown_pngs(deck):
        r = report(png)
        if r is None:
            problems.append(f"{where}: not rendered by attention_utils (no figure report in the PNG)")
            continue
        if r["text_px"] < au.MIN_TEXT_PX - 0.05:
            problems.append(f"{where}: smallest text {r['text_px']:.1f} px on the slide "
                            f"(at least {au.MIN_TEXT_PX}); image {r['size'][0]}x{r['size'][1]} px")
        if r["legend_overlaps"]:
            problems.append(f"{where}: the legend covers {r['legend_overlaps']} data artist(s)")
    assert not problems, "\n".join(problems)


def test_interactive_frames_keep_size_and_axes(deck):
    """Sliding compares frames: they keep one size, and plot axes keep their limits."""
    groups = {}
    for where, png, group in shown_pngs(deck):
        if group is not None:
            groups.setdefault(group, []).append((where, report(png)))
    problems = []
    for frames in groups.values():
        first_where, first = frames[0]
        for where, r in frames[1:]:
            if r is None or first is None:
                continue                     # reported by the test above
            if r["size"] != first["size"]:
                problems.append(f"{where}: {r['size']} px, but {first_where} is {first['size']}")
            if r["axes_limits"] != first["axes_limits"]:
                problems.append(f"{where}: axes limits {r['axes_limits']} differ from "
                                f"{first['axes_limits']} of {first_where}")
    assert not problems, "\n".join(problems)
