"""Draw img/01_attention_pooling.png: one query, three key-value pairs,
scores -> softmax -> weighted sum, with the numbers of deck 01's tiny example.

Run from the repository root:  .venv/bin/python img/make_01_attention_pooling.py
Each row of the figure is one key-value pair; each column is one step.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
# Labels are Chinese: a CJK font first (Linux, macOS, Windows), DejaVu last.
plt.rcParams.update({
    "font.sans-serif": ["Noto Sans CJK SC", "PingFang SC", "Heiti SC", "Hiragino Sans GB",
                        "Microsoft YaHei", "SimHei", "DejaVu Sans"],
    "font.family": "sans-serif", "axes.unicode_minus": False, "mathtext.fontset": "dejavusans"})
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# The tiny example of deck 01: q = (2, 1), dot-product scores.
query = np.array([2.0, 1.0])
keys = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
values = np.array([1.0, 2.0, 3.0])
scores = keys @ query                                   # (3,)
weights = np.exp(scores) / np.exp(scores).sum()         # (3,)
output = weights @ values                               # scalar

QUERY, KEY, SCORE, SOFTMAX, VALUE, OUT = (
    "#f4a259", "#5b8def", "#9aa5b1", "#c77dff", "#52b788", "#e76f51")
ROWS = [3.3, 2.0, 0.7]                                  # y of pair 1, 2, 3
H = 0.78                                                # box height


def box(ax, x0, x1, y, text, color, height=H, fontsize=13, alpha=0.9):
    ax.add_patch(FancyBboxPatch(
        (x0, y - height / 2), x1 - x0, height,
        boxstyle="round,pad=0.02,rounding_size=0.12",
        facecolor=color, edgecolor="black", linewidth=1.0, alpha=alpha))
    ax.text((x0 + x1) / 2, y, text, ha="center", va="center",
            fontsize=fontsize)


def arrow(ax, start, end, color="black", rad=0.0):
    ax.add_patch(FancyArrowPatch(
        start, end, arrowstyle="-|>", mutation_scale=14, linewidth=1.3,
        color=color, connectionstyle=f"arc3,rad={rad}",
        shrinkA=2, shrinkB=2))


fig, ax = plt.subplots(figsize=(13, 4.9))
ax.set_xlim(-0.2, 17.2)
ax.set_ylim(-0.95, 4.55)
ax.axis("off")

# One light band per row: a row is one key-value pair and its score/weight.
for i, y in enumerate(ROWS):
    ax.add_patch(FancyBboxPatch(
        (2.55, y - 0.55), 11.0, 1.1, boxstyle="round,pad=0,rounding_size=0.2",
        facecolor="#eef1f5", edgecolor="none", zorder=0))

# Column headers.
for x, text in [(1.0, "查询"), (3.5, "键"), (5.9, "分数"),
                (8.0, "softmax"), (10.2, "权重"), (12.6, "值"),
                (15.8, "输出")]:
    ax.text(x, 4.3, text, ha="center", va="center", fontsize=15,
            fontweight="bold")

# Query.
box(ax, 0.1, 1.9, ROWS[1], "$\\mathbf{q}$\n(2, 1)", QUERY, height=1.3)

for i, y in enumerate(ROWS):
    n = i + 1
    k = keys[i]
    box(ax, 2.8, 4.2, y, f"$\\mathbf{{k}}_{n}$ ({k[0]:.0f}, {k[1]:.0f})",
        KEY, fontsize=12)
    arrow(ax, (1.9, ROWS[1]), (2.8, y))
    box(ax, 5.0, 6.8, y, f"$s_{n}$ = {scores[i]:.0f}", SCORE, fontsize=13)
    arrow(ax, (4.2, y), (5.0, y))
    arrow(ax, (6.8, y), (7.5, y))
    # Weight as a bar whose length is proportional to alpha_i.
    bar = 1.1 * weights[i]
    ax.add_patch(FancyBboxPatch(
        (9.1, y - 0.2), max(bar, 0.02), 0.4, boxstyle="square,pad=0",
        facecolor=SOFTMAX, edgecolor="black", linewidth=0.8))
    ax.text(9.1 + bar + 0.1, y, f"$\\alpha_{n}$ = {weights[i]:.2f}",
            ha="left", va="center", fontsize=12)
    arrow(ax, (8.5, y), (9.05, y))
    ax.text(11.72, y, "×", ha="center", va="center", fontsize=16)
    box(ax, 12.0, 13.2, y, f"$v_{n}$ = {values[i]:.0f}", VALUE, fontsize=12)
    arrow(ax, (13.2, y), (14.28, ROWS[1] + 0.25 * (1 - i)), rad=0.0)

# Softmax spans all rows: every weight depends on every score.
box(ax, 7.5, 8.5, ROWS[1], "soft-\nmax", SOFTMAX, height=3.5, fontsize=12)

# Sum and output.
ax.add_patch(plt.Circle((14.55, ROWS[1]), 0.3, facecolor="white",
                        edgecolor="black", linewidth=1.2))
ax.text(14.55, ROWS[1], "Σ", ha="center", va="center", fontsize=15)
arrow(ax, (14.85, ROWS[1]), (15.15, ROWS[1]))
box(ax, 15.15, 16.5, ROWS[1], f"{output:.2f}", OUT, height=1.0, fontsize=14)

# Step labels along the bottom.
for x0, x1, text in [
        (2.8, 6.8, "① 评分  $s_i = a(\\mathbf{q}, \\mathbf{k}_i)$"),
        (7.5, 11.4, "② $\\alpha_i = \\mathrm{softmax}(s)_i$"),
        (11.9, 16.5, "③ 加权和  $\\sum_i \\alpha_i v_i$")]:
    ax.plot([x0, x1], [-0.35, -0.35], color="black", linewidth=1.2)
    ax.plot([x0, x0], [-0.35, -0.2], color="black", linewidth=1.2)
    ax.plot([x1, x1], [-0.35, -0.2], color="black", linewidth=1.2)
    ax.text((x0 + x1) / 2, -0.7, text, ha="center", va="center", fontsize=13)

ax.text(2.6, -0.05, "每一行 = 一对键–值 $(\\mathbf{k}_i, v_i)$", ha="left", va="center",
        fontsize=12, color="#555555")

out = Path(__file__).with_name("01_attention_pooling.png")
fig.savefig(out, dpi=100, bbox_inches="tight", metadata={"Software": None})
print(f"wrote {out}")
