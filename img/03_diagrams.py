"""Make the three diagrams of deck 03 (attention scoring functions).

    .venv/bin/python img/03_diagrams.py

writes, next to this script:

* 03_scoring_pipeline.png -- one query, S keys: scores a(q, k_i) -> softmax
  -> weights -> weighted sum of the S values (the slide's formula uses S); the query
  is one tall box whose arrows run below the key boxes, crossing nothing.
* 03_additive_broadcast.png -- additive attention's broadcast for one
  sequence of the batch: (B, L, 1, h) + (B, 1, S, h) -> (B, L, S, h), every
  cell an h-vector (drawn as a small column vector), then w_v -> (B, L, S).
* 03_dot_product_shapes.png -- softmax(Q K^T / sqrt(E)) V drawn to scale
  (L = 3, S = 5, E = 2, Ev = 4), per sequence (the slide's notes say that the batch uses @,
  torch.bmm, which adds B in front).

All are drawn in the course figure style of attention_utils (fonts, CJK
fallback) and saved with its figure report, so tests/test_lecture_rules.py can
check that every text is at least 16 px tall on a 1280x720 slide. Shapes follow
the module's legend: B batch, L queries, S keys/values, E query/key size,
Ev value size, h hidden units; matrices and vectors are bold, as on the
slides. The deck embeds the PNGs as markdown
attachments (JupyterLab renders PNG attachments even in an untrusted notebook).
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import attention_utils as au  # noqa: E402  (sets the course style and the CJK fonts)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch, Rectangle  # noqa: E402

BLUE, ORANGE, GREEN, PURPLE, GREY = "#1d4ed8", "#c2410c", "#15803d", "#6d28d9", "#334155"
FILL = {BLUE: "#dbeafe", ORANGE: "#ffedd5", GREEN: "#dcfce7", PURPLE: "#ede9fe", GREY: "#f1f5f9"}
INK = "#0f172a"        # every text is dark: read from the back row


def canvas(width, height):
    """A figure whose data units are 1/100 inch (1 px at 100 dpi); y grows downwards."""
    fig = plt.figure(figsize=(width, height), layout="none")   # positions are drawn by hand
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width * 100)
    ax.set_ylim(height * 100, 0)
    ax.axis("off")
    return fig, ax


def box(ax, x, y, w, h, text, color, size=16):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=8",
                                facecolor=FILL[color], edgecolor=color, linewidth=1.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, color=INK)


def arrow(ax, start, end, color=GREY, label=None, label_offset=(0, -9), size=15):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6,
                                shrinkA=0, shrinkB=0, mutation_scale=16))
    if label:
        ax.text((start[0] + end[0]) / 2 + label_offset[0],
                (start[1] + end[1]) / 2 + label_offset[1], label,
                ha="center", va="bottom", fontsize=size, color=color)


def scoring_pipeline():
    """q and keys k_1..k_S -> scores a(q, k_i) -> softmax -> weights -> sum_i alpha_i v_i.

    The query is one tall box; its arrows run below each key box, so no arrow
    crosses a box or a label.
    """
    fig, ax = canvas(10.4, 3.05)
    rows = {"1": 62, "2": 130, "S": 228}          # centre line of each row
    box(ax, 10, 44, 60, 218, r"$\mathbf{q}$", BLUE, 18)
    ax.text(40, 14, "查询", ha="center", fontsize=15, color=BLUE)
    for i, y in rows.items():
        box(ax, 105, y - 18, 76, 34, rf"$\mathbf{{k}}_{i}$", ORANGE, 17)
        arrow(ax, (181, y - 1), (235, y - 1), ORANGE)
        arrow(ax, (70, y + 25), (235, y + 25), BLUE)     # passes below the key box
        box(ax, 235, y - 20, 150, 54, rf"$a(\mathbf{{q}}, \mathbf{{k}}_{i})$", PURPLE, 17)
        arrow(ax, (385, y + 7), (455, y + 7), PURPLE, rf"$s_{i}$")
        arrow(ax, (545, y + 7), (615, y + 7), PURPLE, rf"$\alpha_{i}$")
        box(ax, 855, y - 10, 76, 34, rf"$\mathbf{{v}}_{i}$", GREEN, 17)
        arrow(ax, (855, y + 7), (790, y + 7), GREEN)
    for x in (143, 310, 500, 893):
        ax.text(x, 184, r"$\vdots$", ha="center", va="center", fontsize=17, color=GREY)
    ax.text(143, 14, "键", ha="center", fontsize=15, color=ORANGE)
    ax.text(310, 14, "评分函数", ha="center", fontsize=15, color=PURPLE)
    ax.text(893, 14, "值", ha="center", fontsize=15, color=GREEN)
    box(ax, 455, 30, 90, 232, "softmax", PURPLE, 15)
    box(ax, 615, 30, 175, 232, "", GREEN)
    ax.text(702, 105, "加权求和", ha="center", va="center", fontsize=16, color=INK)
    ax.text(702, 165, r"$\sum_{i=1}^{S} \alpha_i \mathbf{v}_i$", ha="center", va="center",
            fontsize=18, color=INK)
    arrow(ax, (702, 262), (702, 290), GREEN)
    ax.text(715, 292, r"输出 $f(\mathbf{q})$", ha="left", va="center", fontsize=15, color=GREEN)
    ax.text(10, 292, "一个查询，$S$ 个键值对", ha="left", va="center", fontsize=15, color=GREY)
    return fig


def h_vector(ax, x, y, size=12, color=PURPLE):
    """A small column vector (four stacked cells): one h-dimensional vector."""
    for k in range(4):
        ax.add_patch(Rectangle((x, y + k * size), size, size, facecolor="white",
                               edgecolor=color, lw=1.0))


def additive_broadcast():
    """(B, L, 1, h) + (B, 1, S, h) -> (B, L, S, h) -> tanh, @ w_v -> (B, L, S), one sequence shown."""
    L, S, cell = 3, 5, 66
    fig, ax = canvas(10.6, 4.15)
    x0, y0 = 300, 85                        # top-left corner of the L x S grid
    for i in range(L):
        box(ax, x0 - 112, y0 + i * cell + 6, 96, cell - 12, rf"$\mathbf{{W}}_q\mathbf{{q}}_{i + 1}$", BLUE, 15)
    for j in range(S):
        box(ax, x0 + j * cell + 3, y0 - 62, cell - 6, 50, rf"$\mathbf{{W}}_k\mathbf{{k}}_{j + 1}$", ORANGE, 14)
    for i in range(L):
        for j in range(S):
            ax.add_patch(Rectangle((x0 + j * cell, y0 + i * cell), cell, cell,
                                   facecolor=FILL[PURPLE], edgecolor=PURPLE, lw=1.2))
            h_vector(ax, x0 + j * cell + cell / 2 - 6, y0 + i * cell + cell / 2 - 24)
    ax.text(x0 - 124, y0 + L * cell / 2, "(B, L, 1, h)", ha="right", va="center",   # left of the queries
            fontsize=14, color=BLUE)
    ax.text(x0 + S * cell + 10, y0 - 36, "(B, 1, S, h)", ha="left", fontsize=14, color=ORANGE)
    ax.text(x0 + S * cell / 2, y0 + L * cell + 30,
            r"$\tanh(\mathbf{W}_q\mathbf{q}_i + \mathbf{W}_k\mathbf{k}_j)$：(B, L, S, h)",
            ha="center", fontsize=15, color=PURPLE)
    arrow(ax, (x0 + S * cell + 15, y0 + L * cell / 2), (x0 + S * cell + 135, y0 + L * cell / 2),
          PURPLE, r"$\cdot\,\mathbf{w}_v$", size=17)
    x1 = x0 + S * cell + 150
    for i in range(L):
        for j in range(S):
            ax.add_patch(Rectangle((x1 + j * 44, y0 + i * cell), 44, cell,
                                   facecolor="#c4b5fd", edgecolor=PURPLE, lw=1.2))
    ax.text(x1 + S * 22, y0 + L * cell + 30, r"分数 $a(\mathbf{q}_i, \mathbf{k}_j)$：(B, L, S)",
            ha="center", fontsize=15, color=PURPLE)
    ax.text(x1 + S * 22, y0 - 36, "每对一个数", ha="center", fontsize=15, color=INK)
    # The key to the glyph, and what the picture leaves out.
    y2 = y0 + L * cell + 68
    h_vector(ax, 24, y2 - 10)
    ax.text(46, y2 + 14, "= 一个 $h$ 维向量。图中只画了批量里的一个序列；"
            "(B, L, S, h) 这个中间张量让加性注意力很占内存。",
            ha="left", va="center", fontsize=14, color=INK)
    return fig


def dot_product_shapes():
    """softmax(Q K^T / sqrt(E)) V with rectangles drawn to scale: L=3, S=5, E=2, Ev=4."""
    u = 27
    fig, ax = canvas(10.4, 1.98)     # the per-sequence / batch remark is in the slide's notes
    y = 42

    def matrix(x, rows, cols, color, label, shape):
        ax.add_patch(Rectangle((x, y), cols * u, rows * u, facecolor=FILL[color],
                               edgecolor=color, lw=1.8))
        for r in range(1, rows):
            ax.plot([x, x + cols * u], [y + r * u] * 2, color=color, lw=0.6)
        for c in range(1, cols):
            ax.plot([x + c * u] * 2, [y, y + rows * u], color=color, lw=0.6)
        ax.text(x + cols * u / 2, y - 12, label, ha="center", fontsize=17, color=color)
        ax.text(x + cols * u / 2, y + rows * u + 30, shape, ha="center", fontsize=15, color=INK)
        return x + cols * u

    def op(x, text):
        ax.text(x, y + 2.5 * u, text, ha="center", va="center", fontsize=19, color=INK)

    x = matrix(40, 3, 2, BLUE, r"$\mathbf{Q}$", "(L, E)")
    op(x + 25, r"$\times$")
    x = matrix(x + 50, 2, 5, ORANGE, r"$\mathbf{K}^\top$", "(E, S)")
    arrow(ax, (x + 12, y + 2.5 * u), (x + 165, y + 2.5 * u), PURPLE,
          r"$/\sqrt{E}$，softmax", (0, -8))
    x = matrix(x + 180, 3, 5, PURPLE, "权重", "(L, S)")
    op(x + 25, r"$\times$")
    x = matrix(x + 50, 5, 4, GREEN, r"$\mathbf{V}$", "(S, Ev)")
    op(x + 25, r"$=$")
    matrix(x + 50, 3, 4, GREEN, "输出", "(L, Ev)")
    return fig


if __name__ == "__main__":
    for name, draw in [("03_scoring_pipeline.png", scoring_pipeline),
                       ("03_additive_broadcast.png", additive_broadcast),
                       ("03_dot_product_shapes.png", dot_product_shapes)]:
        fig = draw()
        out = HERE / name
        out.write_bytes(au._png(fig))
        plt.close(fig)
        print(f"wrote {out}")
