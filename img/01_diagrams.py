"""Make the diagrams of deck 01 (attention cues).

    .venv/bin/python img/01_diagrams.py

writes, next to this script:

* 01_two_cues.png -- the same web page seen twice: without a goal the eye is
  pulled to the loud red button (nonvolitional cue); with the goal "find 提交"
  it goes to the plain 提交 link (volitional cue), the query of attention.
* 01_attention_pooling.png -- one query, three key-value pairs,
  scores -> softmax -> weighted sum, with the numbers of the deck's tiny example.
  The weights carry three decimals (0.245, 0.090, 0.665), so that a student who
  multiplies them by the values by hand gets the 2.42 shown (two decimals would
  give 2.43). The softmax box says what it computes: exp, then divide by the sum.
  Each row is one key-value pair; the three steps run left to right, bracketed
  ① ② ③ under the figure (four of the seven columns are data, not steps).
  Indices are subscripts, as on the slides (k_1, s_1, α_1, v_1); attention_utils
  draws scripts at 0.9 of the text (SCRIPT_SCALE), so they stay over 16 px.

Both are drawn in the course figure style of attention_utils (fonts, CJK
fallback) and saved with its figure report, so tests/test_lecture_rules.py can
check that every text is at least 16 px tall on a 1280x720 slide.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import attention_utils as au  # noqa: E402  (sets the course style and the CJK fonts)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Circle, Ellipse, FancyArrowPatch, FancyBboxPatch  # noqa: E402

INK = "#222222"        # every text is dark: read from the back row
TEXT_LINE = "#8a939e"  # the grey bars that stand for ordinary text on the page
LOUD = "#e63946"       # the salient button
QUERY = "#f4a259"      # the goal / query, as in the pooling diagram


def arrow(ax, start, end, color=INK, rad=0.0, width=1.4, scale=16):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=scale,
                                 linewidth=width, color=color, shrinkA=2, shrinkB=2,
                                 connectionstyle=f"arc3,rad={rad}"))


# ---------------------------------------------------------------- two cues

def eye(ax, x, y):
    """A simple eye looking right, centred at (x, y)."""
    ax.add_patch(Ellipse((x, y), 1.1, 0.62, facecolor="white", edgecolor=INK, linewidth=1.6))
    ax.add_patch(Circle((x + 0.12, y), 0.2, facecolor="#3d5a80", edgecolor=INK))
    ax.add_patch(Circle((x + 0.12, y), 0.08, facecolor=INK))


def page(ax, x0, focus, ring_color):
    """A web page with grey text lines, a loud red button and a plain 提交 link."""
    ax.add_patch(FancyBboxPatch((x0, 0.0), 5.2, 4.4, boxstyle="round,pad=0,rounding_size=0.15",
                                facecolor="white", edgecolor=INK, linewidth=1.4))
    for k, y in enumerate([3.9, 3.5, 3.1, 1.5, 1.1]):            # ordinary text
        ax.plot([x0 + 0.35, x0 + (4.6 if k % 2 == 0 else 3.9)], [y, y],
                color=TEXT_LINE, linewidth=6, solid_capstyle="round")
    button = FancyBboxPatch((x0 + 1.1, 2.05), 3.0, 0.65, boxstyle="round,pad=0,rounding_size=0.12",
                            facecolor=LOUD, edgecolor=INK, linewidth=1.0)
    ax.add_patch(button)
    ax.text(x0 + 2.6, 2.375, "限时抢购！", ha="center", va="center", color="white",
            fontsize=16, fontweight="bold")
    ax.text(x0 + 4.35, 0.45, "提交", ha="center", va="center", color=INK, fontsize=14)
    target = (x0 + 2.6, 2.375) if focus == "button" else (x0 + 4.35, 0.45)
    ring = Ellipse(target, 3.5 if focus == "button" else 1.2, 1.0 if focus == "button" else 0.7,
                   facecolor="none", edgecolor=ring_color, linewidth=3)
    ax.add_patch(ring)
    return target


def two_cues():
    fig, ax = plt.subplots(figsize=(12, 5.0))
    ax.set_xlim(-1.6, 14.6)
    ax.set_ylim(-1.1, 5.4)
    ax.set_aspect("equal")
    ax.axis("off")

    # Left: no goal, the salient button wins.
    target = page(ax, 0.8, "button", LOUD)
    eye(ax, -0.9, 2.2)
    arrow(ax, (-0.3, 2.25), (target[0] - 1.8, target[1]), color=LOUD, width=2.4)
    ax.text(3.4, 5.0, "非自主性提示：显眼的东西抢走目光", ha="center", va="center",
            fontsize=16, fontweight="bold", color=INK)
    ax.text(3.4, -0.7, "没有目的：看向最显眼的红按钮",
            ha="center", va="center", fontsize=15, color=INK)

    # Right: the goal (the query) decides.
    target = page(ax, 8.9, "link", QUERY)
    eye(ax, 7.2, 2.2)
    ax.add_patch(FancyBboxPatch((6.35, 3.3), 2.2, 0.75, boxstyle="round,pad=0.05,rounding_size=0.2",
                                facecolor=QUERY, edgecolor=INK, linewidth=1.2))
    ax.text(7.45, 3.675, "找“提交”", ha="center", va="center", fontsize=15, color=INK)
    ax.plot([7.2, 7.3], [2.6, 3.2], color=INK, linewidth=1.2)      # the thought's tail
    arrow(ax, (7.8, 2.1), (target[0] - 0.6, target[1] + 0.1), color=QUERY, width=2.8, rad=0.25)
    ax.text(11.5, 5.0, "自主性提示：目的决定看哪里", ha="center", va="center",
            fontsize=16, fontweight="bold", color=INK)
    ax.text(11.5, -0.7, "带着目的（查询）：看向不显眼的“提交”", ha="center", va="center",
            fontsize=15, color=INK)
    return fig


# ---------------------------------------------------------------- attention pooling

# The tiny example of deck 01: q = (2, 1), dot-product scores.
query = np.array([2.0, 1.0])
keys = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
values = np.array([1.0, 2.0, 3.0])
scores = keys @ query                                   # (3,)
weights = np.exp(scores) / np.exp(scores).sum()         # (3,)
output = weights @ values                               # scalar

KEY, SCORE, SOFTMAX, VALUE, OUT = "#5b8def", "#c3cad3", "#c77dff", "#52b788", "#e76f51"
ROWS = [3.3, 2.0, 0.7]                                  # y of pair 1, 2, 3
H = 0.78                                                # box height


def box(ax, x0, x1, y, text, color, height=H, fontsize=15):
    ax.add_patch(FancyBboxPatch((x0, y - height / 2), x1 - x0, height,
                                boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=color, edgecolor="black", linewidth=1.0, alpha=0.9))
    ax.text((x0 + x1) / 2, y, text, ha="center", va="center", fontsize=fontsize, color=INK)


def attention_pooling():
    fig, ax = plt.subplots(figsize=(12, 5.2))
    ax.set_xlim(-0.2, 17.4)
    ax.set_ylim(-1.25, 4.6)
    ax.axis("off")

    # One light band per row: a row is one key-value pair and its score/weight.
    for y in ROWS:
        ax.add_patch(FancyBboxPatch((2.55, y - 0.55), 11.0, 1.1,
                                    boxstyle="round,pad=0,rounding_size=0.2",
                                    facecolor="#eef1f5", edgecolor="none", zorder=0))
    # Column headers.
    for x, text in [(1.0, "查询"), (3.5, "键"), (5.9, "分数"), (8.0, "softmax"),
                    (10.2, "权重"), (12.6, "值"), (15.9, "输出")]:
        ax.text(x, 4.3, text, ha="center", va="center", fontsize=16, fontweight="bold", color=INK)

    box(ax, 0.1, 1.9, ROWS[1], "$\\mathbf{q}$\n(2, 1)", QUERY, height=1.3)
    for i, y in enumerate(ROWS):
        n = i + 1
        k = keys[i]
        box(ax, 2.75, 4.25, y, f"$\\mathbf{{k}}_{n}$ ({k[0]:.0f}, {k[1]:.0f})", KEY, fontsize=14)
        arrow(ax, (1.9, ROWS[1]), (2.75, y))
        box(ax, 5.0, 6.8, y, f"$s_{n}$ = {scores[i]:.0f}", SCORE)
        arrow(ax, (4.25, y), (5.0, y))
        arrow(ax, (6.8, y), (7.5, y))
        bar = 1.0 * weights[i]                           # bar length proportional to alpha_i
        ax.add_patch(FancyBboxPatch((9.0, y - 0.2), max(bar, 0.02), 0.4, boxstyle="square,pad=0",
                                    facecolor=SOFTMAX, edgecolor="black", linewidth=0.8))
        ax.text(9.0 + bar + 0.1, y, f"$\\alpha_{n}$ = {weights[i]:.3f}", ha="left",
                va="center", fontsize=14, color=INK)
        arrow(ax, (8.5, y), (8.95, y))
        ax.text(11.78, y, "×", ha="center", va="center", fontsize=18, color=INK)
        box(ax, 12.05, 13.25, y, f"$v_{n}$ = {values[i]:.0f}", VALUE, fontsize=14)
        arrow(ax, (13.25, y), (14.28, ROWS[1] + 0.25 * (1 - i)))
    # Softmax spans all rows: every weight depends on every score.
    box(ax, 7.5, 8.5, ROWS[1], "exp\n÷\n总和", SOFTMAX, height=3.5, fontsize=14)
    # Sum and output.
    ax.add_patch(Circle((14.55, ROWS[1]), 0.3, facecolor="white", edgecolor="black", linewidth=1.2))
    ax.text(14.55, ROWS[1], "Σ", ha="center", va="center", fontsize=16, color=INK)
    arrow(ax, (14.85, ROWS[1]), (15.2, ROWS[1]))
    box(ax, 15.2, 16.6, ROWS[1], f"{output:.2f}", OUT, height=1.0, fontsize=16)

    # Step labels along the bottom.
    for x0, x1, text in [(2.75, 6.8, "① 评分  $s = a(\\mathbf{q}, \\mathbf{k})$"),
                         (7.5, 11.4, "② $\\alpha = \\mathrm{softmax}(s)$"),
                         (12.05, 16.6, "③ 加权和  $\\sum\\, \\alpha v$")]:
        ax.plot([x0, x1], [-0.3, -0.3], color="black", linewidth=1.2)
        ax.plot([x0, x0], [-0.3, -0.15], color="black", linewidth=1.2)
        ax.plot([x1, x1], [-0.3, -0.15], color="black", linewidth=1.2)
        ax.text((x0 + x1) / 2, -0.7, text, ha="center", va="center", fontsize=15, color=INK)
    return fig


if __name__ == "__main__":
    for name, draw in [("01_two_cues.png", two_cues), ("01_attention_pooling.png", attention_pooling)]:
        fig = draw()
        out = HERE / name
        out.write_bytes(au._png(fig))
        plt.close(fig)
        print(f"wrote {out}")
