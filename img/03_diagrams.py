"""Draw the diagrams of deck 03 (attention scoring functions).

Run from the repository root:  .venv/bin/python img/03_diagrams.py
Writes img/03_scoring_pipeline.svg, img/03_additive_broadcast.svg and
img/03_dot_product_shapes.svg (text stored as paths, so no font is needed to
view them). Pass --png to also write PNG previews next to them.
"""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch, Rectangle

OUT = Path(__file__).resolve().parent
plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "deck03",
                     "font.family": "DejaVu Sans", "font.size": 13})

BLUE, ORANGE, GREEN, PURPLE, GREY = "#2563eb", "#ea580c", "#16a34a", "#7c3aed", "#475569"
FILL = {BLUE: "#dbeafe", ORANGE: "#ffedd5", GREEN: "#dcfce7", PURPLE: "#ede9fe",
        GREY: "#f1f5f9"}


def canvas(width, height, scale=1.0):
    """A figure whose data units are 1/100 inch at scale 1 (so text stays legible)."""
    fig = plt.figure(figsize=(width * scale, height * scale))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width * 100)
    ax.set_ylim(height * 100, 0)          # y grows downwards, as in SVG
    ax.axis("off")
    return fig, ax


def box(ax, x, y, w, h, text, color, size=13, math=True):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=8",
                                facecolor=FILL[color], edgecolor=color, linewidth=1.6))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            color="#0f172a")


def arrow(ax, start, end, color=GREY, label=None, label_offset=(0, -9)):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.4,
                                shrinkA=0, shrinkB=0, mutation_scale=14))
    if label:
        ax.text((start[0] + end[0]) / 2 + label_offset[0],
                (start[1] + end[1]) / 2 + label_offset[1], label,
                ha="center", va="bottom", fontsize=12, color=color)


def save(fig, name, png):
    fig.savefig(OUT / f"{name}.svg", metadata={"Date": None})
    if png:
        fig.savefig(OUT / f"{name}.png", dpi=110)
    plt.close(fig)


def scoring_pipeline(png):
    """q and keys -> scores a(q, k_i) -> softmax -> weights -> sum_i alpha_i v_i."""
    fig, ax = canvas(9.6, 3.3, scale=0.9)
    rows = {"1": 60, "2": 140, "m": 255}
    box(ax, 15, 130, 60, 40, r"$\mathbf{q}$", BLUE, 15)
    ax.text(45, 190, "query", ha="center", fontsize=11, color=BLUE)
    for i, y in rows.items():
        box(ax, 110, y - 34, 64, 30, rf"$\mathbf{{k}}_{i}$", ORANGE)
        arrow(ax, (174, y - 19), (230, y - 19), ORANGE)
        arrow(ax, (75, 150), (230, y + 5), BLUE)
        box(ax, 230, y - 34, 130, 50, rf"$a(\mathbf{{q}}, \mathbf{{k}}_{i})$", PURPLE)
        arrow(ax, (360, y - 9), (425, y - 9), PURPLE, rf"$s_{i}$")
        arrow(ax, (505, y - 9), (575, y - 9), PURPLE, rf"$\alpha_{i}$")
        box(ax, 790, y - 24, 64, 30, rf"$\mathbf{{v}}_{i}$", GREEN)
        arrow(ax, (790, y - 9), (725, y - 9), GREEN)
    for x in (142, 295, 465, 822):
        ax.text(x, 205, r"$\vdots$", ha="center", va="center", fontsize=15, color=GREY)
    ax.text(142, 22, "keys", ha="center", fontsize=11, color=ORANGE)
    ax.text(295, 22, "scoring function", ha="center", fontsize=11, color=PURPLE)
    ax.text(822, 22, "values", ha="center", fontsize=11, color=GREEN)
    box(ax, 425, 20, 80, 260, "softmax", PURPLE, 11)
    box(ax, 575, 20, 150, 260, "", GREEN)
    ax.text(650, 140, "weighted\nsum", ha="center", va="center", fontsize=12)
    ax.text(650, 200, r"$\sum_i \alpha_i \mathbf{v}_i$", ha="center", va="center", fontsize=14)
    arrow(ax, (650, 280), (650, 312), GREEN)
    ax.text(660, 318, "output  f(q)", ha="left", va="center", fontsize=12, color=GREEN)
    save(fig, "03_scoring_pipeline", png)


def additive_broadcast(png):
    """(L, 1, h) + (1, S, h) -> (L, S, h) -> tanh -> @ w_v -> (L, S)."""
    L, S, cell = 3, 5, 46
    fig, ax = canvas(9.6, 3.2)
    x0, y0 = 170, 95                       # top-left corner of the L x S grid
    # queries: a column of L projected vectors, keys: a row of S projected vectors
    for i in range(L):
        box(ax, x0 - 80, y0 + i * cell + 4, 60, cell - 8, rf"$W_q\mathbf{{q}}_{i + 1}$", BLUE, 11)
    for j in range(S):
        box(ax, x0 + j * cell + 3, y0 - 62, cell - 6, 50, rf"$W_k\mathbf{{k}}_{j + 1}$", ORANGE, 9)
    for i in range(L):
        for j in range(S):
            ax.add_patch(Rectangle((x0 + j * cell, y0 + i * cell), cell, cell,
                                   facecolor=FILL[PURPLE], edgecolor=PURPLE, lw=1.2))
            # a little stack of h boxes: each cell holds an h-vector
            for k in range(3):
                ax.add_patch(Rectangle((x0 + j * cell + 12 + 5 * k, y0 + i * cell + 10 + 4 * k),
                                       16, 16, facecolor="white", edgecolor=PURPLE, lw=0.8))
    ax.text(x0 - 50, y0 - 40, "(L, 1, h)", ha="center", fontsize=11, color=BLUE)
    ax.text(x0 + S * cell + 12, y0 - 40, "(1, S, h)", ha="left", fontsize=11, color=ORANGE)
    ax.text(x0 + S * cell / 2, y0 + L * cell + 22,
            r"$\tanh(W_q\mathbf{q}_i + W_k\mathbf{k}_j)$:  (L, S, h)",
            ha="center", fontsize=12, color=PURPLE)
    arrow(ax, (x0 + S * cell + 15, y0 + L * cell / 2), (x0 + S * cell + 130, y0 + L * cell / 2),
          PURPLE, r"$\cdot\,\mathbf{w}_v$")
    x1 = x0 + S * cell + 145
    for i in range(L):
        for j in range(S):
            ax.add_patch(Rectangle((x1 + j * 34, y0 + i * cell), 34, cell,
                                   facecolor="#c4b5fd", edgecolor=PURPLE, lw=1.2))
    ax.text(x1 + S * 17, y0 + L * cell + 22, r"scores $a(\mathbf{q}_i, \mathbf{k}_j)$:  (L, S)",
            ha="center", fontsize=12, color=PURPLE)
    ax.text(x1 + S * 17, y0 - 40, "one number per pair", ha="center", fontsize=11, color=GREY)
    ax.text(x0 - 160, y0 + L * cell + 62,
            "Every query meets every key: the (L, S, h) tensor is what makes additive attention "
            "memory-hungry.", fontsize=11, color=GREY)
    save(fig, "03_additive_broadcast", png)


def dot_product_shapes(png):
    """softmax(Q K^T / sqrt(d)) V with rectangles drawn to scale: L=3, S=5, d=2, Ev=4."""
    u = 30
    fig, ax = canvas(9.6, 2.45)
    y = 40

    def matrix(x, rows, cols, color, label, shape):
        ax.add_patch(Rectangle((x, y), cols * u, rows * u, facecolor=FILL[color],
                               edgecolor=color, lw=1.6))
        for r in range(1, rows):
            ax.plot([x, x + cols * u], [y + r * u] * 2, color=color, lw=0.5)
        for c in range(1, cols):
            ax.plot([x + c * u] * 2, [y, y + rows * u], color=color, lw=0.5)
        ax.text(x + cols * u / 2, y - 12, label, ha="center", fontsize=14, color=color)
        ax.text(x + cols * u / 2, y + rows * u + 26, shape, ha="center", fontsize=11, color=GREY)
        return x + cols * u

    def op(x, text):
        ax.text(x, y + 2.5 * u, text, ha="center", va="center", fontsize=16, color="#0f172a")

    x = matrix(20, 3, 2, BLUE, r"$Q$", "(L, d)")
    op(x + 25, r"$\times$")
    x = matrix(x + 50, 2, 5, ORANGE, r"$K^\top$", "(d, S)")
    arrow(ax, (x + 15, y + 2.5 * u), (x + 125, y + 2.5 * u), PURPLE,
          r"$/\sqrt{d}$, softmax", (0, -8))
    x = matrix(x + 140, 3, 5, PURPLE, "weights", "(L, S)")
    op(x + 25, r"$\times$")
    x = matrix(x + 50, 5, 4, GREEN, r"$V$", "(S, Ev)")
    op(x + 25, r"$=$")
    matrix(x + 50, 3, 4, GREEN, "output", "(L, Ev)")
    save(fig, "03_dot_product_shapes", png)


if __name__ == "__main__":
    png = "--png" in sys.argv
    scoring_pipeline(png)
    additive_broadcast(png)
    dot_product_shapes(png)
