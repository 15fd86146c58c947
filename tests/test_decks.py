"""Structural checks on every deck in notebooks/ (DECKS.md), no kernel needed.

nbval re-runs the cells; these tests check what nbval cannot see: that a deck
is a slideshow a teacher can present, that its stored outputs come from one
clean run, and that it teaches from attention_utils instead of redefining it.
"""

import json
import re
from pathlib import Path

import pytest
import torch

import attention_utils as au

DECKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# A cell that continues the slide has no slide_type: the live presenter
# (jupyterlab-slideshow) never shows a cell typed "-", nbconvert treats both alike.
SLIDE_TYPES = {"slide", "subslide", "fragment", "skip", "notes", None}


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell):
    return "".join(cell["source"])


def code_cells(notebook):
    return [c for c in notebook["cells"] if c["cell_type"] == "code" and source(c).strip()]


@pytest.fixture(params=DECKS, ids=[d.stem for d in DECKS])
def deck(request):
    return load(request.param)


def test_there_are_decks():
    assert DECKS, "no decks found in notebooks/"


def slide_type(cell):
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type")


def test_every_cell_has_a_known_slide_type(deck):
    wrong = [i for i, c in enumerate(deck["cells"]) if slide_type(c) not in SLIDE_TYPES]
    assert not wrong, f"cells with an unknown or '-' slideshow.slide_type: {wrong}"
    assert slide_type(deck["cells"][0]) == "slide"


def test_outputs_come_from_one_clean_run(deck):
    cells = code_cells(deck)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))
    for c in cells:
        for output in c.get("outputs", []):
            assert output["output_type"] != "error", source(c)[:80]
            assert output.get("name") != "stderr", f"warning stored in: {source(c)[:80]}"
            text = "".join(output.get("data", {}).get("text/plain", ""))
            assert not re.search(r" at 0x[0-9a-f]+", text), f"address repr in: {source(c)[:80]}"
            assert "image/svg+xml" not in output.get("data", {}), "plots must be PNG"


def test_deck_never_redefines_a_module_name(deck):
    code = "\n".join(source(c) for c in code_cells(deck))
    defined = set(re.findall(r"^\s*(?:def|class)\s+(\w+)", code, re.M))
    defined |= set(re.findall(r"^(\w+)\s*=", code, re.M))
    assert not defined & set(au.__all__)


def test_nbval_markers_are_cell_tags_and_only_on_timings(deck):
    """A '# NBVAL_...' comment would show on the slide; a tag does not. Interactive
    figures store deterministic output, so only timings may ignore theirs."""
    for c in code_cells(deck):
        assert "NBVAL_" not in source(c), f"NBVAL comment on a slide: {source(c)[:80]}"
        if "nbval-ignore-output" in c["metadata"].get("tags", []):
            assert re.search(r"tim(e|ing)|perf_counter|Timer|seconds|秒", source(c)), source(c)[:120]


def test_every_control_is_an_interactive_figure_and_the_deck_has_notes(deck):
    """One helper, au.interactive, draws every control: live, offline and unrun."""
    shown = [c for c in code_cells(deck) if slide_type(c) not in ("skip", "notes")]
    assert any("au.interactive(" in source(c) for c in shown), "no interactive figure on a slide"
    code = "\n".join(source(c) for c in code_cells(deck))
    assert not re.search(r"widgets\.interact|\binteract\(|Output\(\)|\.observe\(", code), \
        "widget plumbing in a deck: use au.interactive"
    for c in shown:
        for output in c.get("outputs", []):
            text = "".join(output.get("data", {}).get("text/plain", ""))
            assert not re.match(r"\s*(interactive|VBox|HBox)\(", text), f"widget repr stored: {text[:60]}"
    notes = [c for c in deck["cells"] if slide_type(c) == "notes"]
    assert len(notes) >= 3


def test_markdown_images_render_in_an_untrusted_notebook(deck):
    """JupyterLab shows only the alt text of an SVG attachment in an untrusted notebook."""
    for c in deck["cells"]:
        if c["cell_type"] != "markdown":
            continue
        assert not re.search(r"\]\([^)]*\.svg\)|<img[^>]*\.svg", source(c)), source(c)[:80]
        for name, bundle in c.get("attachments", {}).items():
            assert set(bundle) <= {"image/png", "image/jpeg"}, f"attachment {name}: {set(bundle)}"


def test_deck_ends_with_summary_and_exercises_with_checked_solutions(deck):
    markdown = [source(c) for c in deck["cells"] if c["cell_type"] == "markdown"]
    assert any(re.search(r"^#+ .*小结", m, re.M) for m in markdown)
    exercises = "\n".join(m for m in markdown if re.search(r"^#+ .*练习", m, re.M))
    assert len(re.findall(r"^\s*(?:\d+\.|[-*])\s", exercises, re.M)) >= 3, "at least three exercises"
    # Reference solutions sit under a 参考答案 heading, after the exercises: hidden from the slides
    # and from a student reading the notebook top to bottom. (Skip cells earlier may check with
    # assert too: those are checks of the lecture, not answers.)
    cells = deck["cells"]
    heading = lambda word: next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                                 and re.search(rf"^#+ .*{word}", source(c), re.M)), None)
    first_exercise, answers = heading("练习"), heading("参考答案")
    assert answers is not None and answers > first_exercise, "a 参考答案 section after 练习"
    solutions = [c for c in cells[answers:] if c["cell_type"] == "code" and slide_type(c) == "skip"
                 and re.search(r"^\s*assert\b", source(c), re.M)]
    assert len(solutions) >= 2, "at least two reference solutions, hidden from the slides, that assert"


def test_self_check_exercises_and_concept_questions(deck):
    """Issue 15: at least two coding exercises a student checks alone (a stub and a check
    cell), and at least three concept questions on the slides whose answers a notebook
    viewer does not show (they are loaded from notebooks/quizzes/, not written in a cell)."""
    cells = code_cells(deck)
    checks = [c for c in cells if re.search(r"\bau\.check_\w+\(", source(c))
              and any("尚未实现" in "".join(o.get("text", "")) for o in c.get("outputs", []))]
    assert len(checks) >= 2, "at least two check cells whose stored run shows the stub's 尚未实现 message"
    quizzes = [c for c in cells if slide_type(c) not in ("skip", "notes")
               and any('class="au-quiz"' in "".join(o.get("data", {}).get("text/html", ""))
                       for o in c.get("outputs", []))]
    assert len(quizzes) >= 3, f"{len(quizzes)} concept questions on the slides (at least 3)"
    for c in cells:
        assert "au.quiz(" not in source(c), "a quiz written in a cell shows its answers in a notebook viewer"


QUIZZES = Path(__file__).resolve().parent.parent / "notebooks" / "quizzes"


@pytest.mark.parametrize("path", sorted(QUIZZES.glob("*.json")), ids=lambda p: p.stem)
def test_concept_question_explanations_do_not_repeat_the_verdict(path):
    """The quiz prints '✓ 正确。' or '✗ 不对。' itself; an explanation that starts with
    its own verdict reads '✗ 不对。不对：...'."""
    quizzes = json.loads(path.read_text(encoding="utf-8"))
    stutters = [f"{name} option {i}: {text[:20]!r}" for name, q in quizzes.items()
                for i, (_, text) in enumerate(q["options"])
                if re.match(r"\s*(对|不对|正确|错误|错|不正确|是的|不是)[。：:，,！!]", text)]
    assert not stutters, "explanations that start with a verdict: " + "; ".join(stutters)


def test_deck_01_quiz_numbers_are_the_computed_ones():
    """The numbers deck 01's concept questions quote come from the lecture's small
    example (keys, values and queries of its four-query slide), not from typing."""
    quizzes = load(Path(__file__).resolve().parent.parent / "notebooks" / "quizzes"
                   / "01_attention_cues.json")

    def text(name):
        quiz = quizzes[name]
        return quiz["question"] + "".join(option + why for option, why in quiz["options"])

    keys = torch.tensor([[1., 0.], [0., 1.], [1., 1.]])
    values = torch.tensor([1., 2., 3.])
    queries = torch.tensor([[2., 1.], [0., 2.], [-2., 0.], [0.4, 0.2]])
    A = torch.softmax(queries @ keys.T, dim=-1)                        # (4, 3)
    small = text("small-weight")
    increase = 99 * A[1, 0]
    for number in (f"{A[1, 0]:.4f}", f"{A[1] @ values:.2f}", f"{increase:.1f}",
                   f"{A[1] @ values + increase:.1f}"):
        assert number in small, f"expected {number} in the small-weight question"
    assert f"{A[:, 1].sum():.2f}" in text("attention-matrix")
