"""Draw the three diagrams of deck 03 (attention scoring functions) as PNG.

Run from the repository root:  .venv/bin/python img/03_diagrams.py
Writes img/03_scoring_pipeline.png, img/03_additive_broadcast.png and
img/03_dot_product_shapes.png. Labels are Chinese (d2l-zh's terms), so a CJK
font must be installed (Linux: fonts-noto-cjk; macOS and Windows ship one).
The deck embeds the PNGs as markdown attachments: JupyterLab renders PNG
attachments even in an untrusted notebook, SVG ones it does not.
Shapes follow the module's legend: L queries, S keys/values, E query/key
size, Ev value size, h hidden units.
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch, Rectangle  # noqa: E402

OUT = Path(__file__).resolve().parent
plt.rcParams.update({
    "font.sans-serif": ["Noto Sans CJK SC", "PingFang SC", "Heiti SC", "Hiragino Sans GB",
                        "Microsoft YaHei", "SimHei", "DejaVu Sans"],
    "font.family": "sans-serif", "axes.unicode_minus": False, "mathtext.fontset": "dejavusans",
    "font.size": 15})

BLUE, ORANGE, GREEN, PURPLE, GREY = "#2563eb", "#ea580c", "#16a34a", "#7c3aed", "#475569"
FILL = {BLUE: "#dbeafe", ORANGE: "#ffedd5", GREEN: "#dcfce7", PURPLE: "#ede9fe",
        GREY: "#f1f5f9"}
INK = "#0f172a"


def canvas(width, height):
    """A figure whose data units are 1/100 inch; y grows downwards."""
    fig = plt.figure(figsize=(width, height))
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


def save(fig, name, dpi=100):
    fig.savefig(OUT / f"{name}.png", dpi=dpi, facecolor="white", bbox_inches="tight", pad_inches=0.1,
                metadata={"Software": None})
    plt.close(fig)


def scoring_pipeline():
    """q and keys -> scores a(q, k_i) -> softmax -> weights -> sum_i alpha_i v_i."""
    fig, ax = canvas(10.4, 3.6)
    rows = {"1": 75, "2": 160, "m": 285}
    box(ax, 10, 150, 64, 44, r"$\mathbf{q}$", BLUE, 18)
    ax.text(42, 215, "查询", ha="center", fontsize=15, color=BLUE)
    for i, y in rows.items():
        box(ax, 110, y - 36, 70, 34, rf"$\mathbf{{k}}_{i}$", ORANGE, 17)
        arrow(ax, (180, y - 19), (235, y - 19), ORANGE)
        arrow(ax, (74, 172), (235, y + 6), BLUE)
        box(ax, 235, y - 36, 150, 54, rf"$a(\mathbf{{q}}, \mathbf{{k}}_{i})$", PURPLE, 17)
        arrow(ax, (385, y - 9), (455, y - 9), PURPLE, rf"$s_{i}$")
        arrow(ax, (545, y - 9), (615, y - 9), PURPLE, rf"$\alpha_{i}$")
        box(ax, 860, y - 26, 70, 34, rf"$\mathbf{{v}}_{i}$", GREEN, 17)
        arrow(ax, (860, y - 9), (790, y - 9), GREEN)
    for x in (145, 310, 500, 895):
        ax.text(x, 228, r"$\vdots$", ha="center", va="center", fontsize=17, color=GREY)
    ax.text(145, 22, "键", ha="center", fontsize=15, color=ORANGE)
    ax.text(310, 22, "评分函数", ha="center", fontsize=15, color=PURPLE)
    ax.text(895, 22, "值", ha="center", fontsize=15, color=GREEN)
    box(ax, 455, 30, 90, 280, "softmax", PURPLE, 15)
    box(ax, 615, 30, 175, 280, "", GREEN)
    ax.text(702, 140, "加权求和", ha="center", va="center", fontsize=16)
    ax.text(702, 205, r"$\sum_i \alpha_i \mathbf{v}_i$", ha="center", va="center", fontsize=18)
    arrow(ax, (702, 310), (702, 342), GREEN)
    ax.text(715, 345, r"输出 $f(\mathbf{q})$", ha="left", va="center", fontsize=15, color=GREEN)
    save(fig, "03_scoring_pipeline", dpi=88)


def additive_broadcast():
    """(L, 1, h) + (1, S, h) -> (L, S, h) -> tanh -> @ w_v -> (L, S)."""
    L, S, cell = 3, 5, 60
    fig, ax = canvas(10.4, 3.9)
    x0, y0 = 185, 105                       # top-left corner of the L x S grid
    for i in range(L):
        box(ax, x0 - 100, y0 + i * cell + 5, 84, cell - 10, rf"$W_q\mathbf{{q}}_{i + 1}$", BLUE, 14)
    for j in range(S):
        box(ax, x0 + j * cell + 3, y0 - 66, cell - 6, 54, rf"$W_k\mathbf{{k}}_{j + 1}$", ORANGE, 12)
    for i in range(L):
        for j in range(S):
            ax.add_patch(Rectangle((x0 + j * cell, y0 + i * cell), cell, cell,
                                   facecolor=FILL[PURPLE], edgecolor=PURPLE, lw=1.2))
            for k in range(3):      # each cell holds an h-vector: a little stack of boxes
                ax.add_patch(Rectangle((x0 + j * cell + 13 + 6 * k, y0 + i * cell + 10 + 5 * k),
                                       18, 18, facecolor="white", edgecolor=PURPLE, lw=0.8))
    ax.text(x0 - 58, y0 - 48, "(L, 1, h)", ha="center", fontsize=14, color=BLUE)
    ax.text(x0 + S * cell + 12, y0 - 44, "(1, S, h)", ha="left", fontsize=14, color=ORANGE)
    ax.text(x0 + S * cell / 2, y0 + L * cell + 26,
            r"$\tanh(W_q\mathbf{q}_i + W_k\mathbf{k}_j)$：(L, S, h)",
            ha="center", fontsize=15, color=PURPLE)
    arrow(ax, (x0 + S * cell + 15, y0 + L * cell / 2), (x0 + S * cell + 135, y0 + L * cell / 2),
          PURPLE, r"$\cdot\,\mathbf{w}_v$", size=17)
    x1 = x0 + S * cell + 150
    for i in range(L):
        for j in range(S):
            ax.add_patch(Rectangle((x1 + j * 38, y0 + i * cell), 38, cell,
                                   facecolor="#c4b5fd", edgecolor=PURPLE, lw=1.2))
    ax.text(x1 + S * 19, y0 + L * cell + 26, r"分数 $a(\mathbf{q}_i, \mathbf{k}_j)$：(L, S)",
            ha="center", fontsize=15, color=PURPLE)
    ax.text(x1 + S * 19, y0 - 44, "每对一个数", ha="center", fontsize=15, color=GREY)
    ax.text(20, y0 + L * cell + 80,
            "每个查询遇到每个键：正是 (L, S, h) 这个中间张量让加性注意力很占内存。",
            fontsize=15, color=GREY)
    save(fig, "03_additive_broadcast")


def dot_product_shapes():
    """softmax(Q K^T / sqrt(E)) V with rectangles drawn to scale: L=3, S=5, E=2, Ev=4."""
    u = 32
    fig, ax = canvas(10.4, 2.7)
    y = 45

    def matrix(x, rows, cols, color, label, shape):
        ax.add_patch(Rectangle((x, y), cols * u, rows * u, facecolor=FILL[color],
                               edgecolor=color, lw=1.8))
        for r in range(1, rows):
            ax.plot([x, x + cols * u], [y + r * u] * 2, color=color, lw=0.6)
        for c in range(1, cols):
            ax.plot([x + c * u] * 2, [y, y + rows * u], color=color, lw=0.6)
        ax.text(x + cols * u / 2, y - 12, label, ha="center", fontsize=17, color=color)
        ax.text(x + cols * u / 2, y + rows * u + 30, shape, ha="center", fontsize=15, color=GREY)
        return x + cols * u

    def op(x, text):
        ax.text(x, y + 2.5 * u, text, ha="center", va="center", fontsize=19, color=INK)

    x = matrix(20, 3, 2, BLUE, r"$Q$", "(L, E)")
    op(x + 25, r"$\times$")
    x = matrix(x + 50, 2, 5, ORANGE, r"$K^\top$", "(E, S)")
    arrow(ax, (x + 12, y + 2.5 * u), (x + 165, y + 2.5 * u), PURPLE,
          r"$/\sqrt{E}$，softmax", (0, -8))
    x = matrix(x + 180, 3, 5, PURPLE, "权重", "(L, S)")
    op(x + 25, r"$\times$")
    x = matrix(x + 50, 5, 4, GREEN, r"$V$", "(S, Ev)")
    op(x + 25, r"$=$")
    matrix(x + 50, 3, 4, GREEN, "输出", "(L, Ev)")
    save(fig, "03_dot_product_shapes")


if __name__ == "__main__":
    scoring_pipeline()
    additive_broadcast()
    dot_product_shapes()
