"""Make the diagrams of deck 04 (multi-head attention).

    .venv/bin/python img/04_diagrams.py

writes, next to this script:

* 04_transpose_qkv.png -- where each entry of X (B, n, H*d) goes in
  transpose_qkv: (B, n, H*d) -> (B, n, H, d) -> (B, H, n, d) -> (B*H, n, d).
  Cell labels are the values of the deck's tiny tensor X[b, t, c] = 100b + 10t + c.
* 04_multihead.png -- the data flow of multi-head attention: H projections,
  H scaled dot-product heads, concatenation, output projection W_o.

Every label is Chinese (d2l-zh terms), drawn with a CJK font fallback.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
# CJK fonts on Linux, macOS, Windows (the first installed one wins), as in attention_utils.
plt.rcParams["font.sans-serif"] = ["Noto Sans CJK SC", "PingFang SC", "Heiti SC",
                                   "Microsoft YaHei", "SimHei", "DejaVu Sans"]
plt.rcParams["axes.unicode_minus"] = False
B, N, H, D = 2, 3, 2, 2
HEAD_COLOURS = ["#9ecae1", "#fdae6b"]       # head 0 blue, head 1 orange
EDGE = {0: "#08519c", 1: "#a63603"}         # batch 0 dark blue edge, batch 1 dark red


def cell(ax, x, y, text, head, batch, w=1.0, h=1.0):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=HEAD_COLOURS[head],
                           edgecolor="white", linewidth=1.5))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=9,
            color="black", family="monospace")


def frame(ax, x, y, w, h, batch, label=None, label_side="left"):
    ax.add_patch(Rectangle((x - 0.08, y - 0.08), w + 0.16, h + 0.16, fill=False,
                           edgecolor=EDGE[batch], linewidth=2))
    if label:
        if label_side == "left":
            ax.text(x - 0.3, y + h / 2, label, ha="right", va="center",
                    fontsize=9, color=EDGE[batch])
        else:
            ax.text(x + w + 0.3, y + h / 2, label, ha="left", va="center",
                    fontsize=9, color=EDGE[batch])


def value(b, t, c):
    return f"{100 * b + 10 * t + c:3d}"


def arrow(ax, x0, x1, y, text, below=None, colour="black"):
    ax.add_patch(FancyArrowPatch((x0, y), (x1, y), arrowstyle="-|>",
                                 mutation_scale=16, linewidth=1.6, color=colour))
    ax.text((x0 + x1) / 2, y + 0.35, text, ha="center", va="bottom",
            fontsize=9, family="monospace", color=colour)
    if below:
        ax.text((x0 + x1) / 2, y - 0.35, below, ha="center", va="top",
                fontsize=8, color="dimgray")


def transpose_qkv_diagram():
    fig, ax = plt.subplots(figsize=(13, 4.6))
    top = 8.6                       # y of the first row; rows go downwards
    # ---- panel 1: X (B, n, H*d)
    x0 = 1.0
    ax.text(x0 + 2, top + 2.5, "X  (B, n, H*d)", ha="center", fontsize=12,
            weight="bold")
    ax.text(x0 + 2, top + 1.95, "第 c 列属于头 c // d", ha="center",
            fontsize=8, color="dimgray")
    for b in range(B):
        y_b = top - b * (N + 1.2)
        for t in range(N):
            for c in range(H * D):
                cell(ax, x0 + c, y_b - t, value(b, t, c), c // D, b)
        frame(ax, x0, y_b - N + 1, H * D, N, b, f"b={b}")
    for c in range(H * D):
        ax.text(x0 + c + 0.5, top + 1.25, f"c={c}", ha="center", fontsize=8)

    # ---- panel 2: (B, H, n, d) -- the modern layout
    x1 = 10.2
    ax.text(x1 + 2.3, top + 2.5, "(B, H, n, d)", ha="center", fontsize=12,
            weight="bold")
    ax.text(x1 + 2.3, top + 1.95, "现代布局（SDPA、nanoGPT）",
            ha="center", fontsize=8, color="dimgray")
    for b in range(B):
        y_b = top - b * (N + 1.2)
        for i in range(H):
            xi = x1 + i * (D + 0.6)
            for t in range(N):
                for j in range(D):
                    cell(ax, xi + j, y_b - t, value(b, t, i * D + j), i, b)
            frame(ax, xi, y_b - N + 1, D, N, b)
            if b == 0:
                ax.text(xi + D / 2, top + 1.25, f"头 {i}", ha="center",
                        fontsize=9)
        ax.text(x1 - 0.3, y_b - N / 2 + 0.5, f"b={b}", ha="right", va="center",
                fontsize=9, color=EDGE[b])

    # ---- panel 3: (B*H, n, d) -- the book's layout
    x2 = 19.4
    ax.text(x2 + 1, top + 2.5, "(B*H, n, d)", ha="center", fontsize=12,
            weight="bold")
    ax.text(x2 + 1, top + 1.95, "书的布局（d2l）",
            ha="center", fontsize=8, color="dimgray")
    gap = 0.35
    for b in range(B):
        for i in range(H):
            row = b * H + i
            y_r = top - row * (N + gap) * 0.62 * 1.0
            # draw smaller cells so four blocks fit the height of two
            for t in range(N):
                for j in range(D):
                    ax.add_patch(Rectangle((x2 + j, y_r - t * 0.62), 1, 0.62,
                                           facecolor=HEAD_COLOURS[i],
                                           edgecolor="white", linewidth=1.2))
                    ax.text(x2 + j + 0.5, y_r - t * 0.62 + 0.31,
                            value(b, t, i * D + j), ha="center", va="center",
                            fontsize=7.5, family="monospace")
            ax.add_patch(Rectangle((x2 - 0.08, y_r - (N - 1) * 0.62 - 0.06),
                                   D + 0.16, N * 0.62 + 0.12, fill=False,
                                   edgecolor=EDGE[b], linewidth=2))
            ax.text(x2 + D + 0.3, y_r - (N - 1) * 0.62 / 2 + 0.31,
                    f"第 {row} 行 = 序列 {b} 的头 {i}", ha="left", va="center",
                    fontsize=9, color=EDGE[b])

    # ---- arrows
    arrow(ax, x0 + H * D + 0.4, x1 - 1.2, top - 0.5, "reshape",
          "+ permute")
    arrow(ax, x1 + H * D + 0.6 + 0.4, x2 - 0.4, top - 0.5, "reshape",
          "把 H 并入 B（复制）")
    arrow(ax, x2 - 0.4, x1 + H * D + 0.6 + 0.4, top - 4.7, "reshape",
          "拆开 B·H", colour="#54278f")
    arrow(ax, x1 - 1.2, x0 + H * D + 0.4, top - 4.7, "permute",
          "+ reshape", colour="#54278f")

    ax.text(x0 - 0.9, top - 2 * (N + 1.2) + 0.2,
            "transpose_qkv：从左到右（黑）     "
            "transpose_output：从右到左（紫）     "
            "格子里的数 = X[b, t, c] = 100b + 10t + c     "
            "颜色 = 头     框 = 序列 b",
            fontsize=9, color="dimgray")
    ax.set_xlim(-0.6, 27.6)
    ax.set_ylim(top - 2 * (N + 1.2) - 0.3, top + 3.0)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(HERE / "04_transpose_qkv.png", dpi=110, bbox_inches="tight",
                facecolor="white")
    plt.close(fig)


def box(ax, x, y, w, h, text, colour, fontsize=10):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05,rounding_size=0.12",
                                facecolor=colour, edgecolor="#333333", linewidth=1.2))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center",
            fontsize=fontsize)


def link(ax, p0, p1, colour="#333333"):
    ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=12,
                                 linewidth=1.1, color=colour))


def multihead_diagram():
    fig, ax = plt.subplots(figsize=(11, 4.3))
    heads = 3
    head_colours = ["#9ecae1", "#fdae6b", "#a1d99b"]
    xs = [0.6, 4.4, 8.2]                      # left edge of each head column
    # inputs
    for k, (name, shape) in enumerate([("查询", "(B, L, $d_q$)"),
                                       ("键", "(B, S, $d_k$)"),
                                       ("值", "(B, S, $d_v$)")]):
        ax.text(0.2 + 4.6 * k + 1.4, 0.15, f"{name} {shape}", ha="center",
                fontsize=10, weight="bold")
    for i in range(heads):
        x = xs[i]
        label = "头 H-1" if i == heads - 1 else f"头 {i}"
        for j, w in enumerate(["W_q", "W_k", "W_v"]):
            sup = "H-1" if i == heads - 1 else str(i)
            box(ax, x + j * 1.05, 1.3, 0.9, 0.6, f"$W_{w[-1]}^{{({sup})}}$",
                head_colours[i], 10)
            link(ax, (0.2 + 4.6 * j + 1.4, 0.55), (x + j * 1.05 + 0.45, 1.25),
                 colour="#bbbbbb")
            link(ax, (x + j * 1.05 + 0.45, 1.95), (x + 1.5, 2.65))
        box(ax, x, 2.7, 3.0, 0.8, "缩放点积注意力", head_colours[i], 9)
        ax.text(x + 1.5, 3.6, f"{label}：(B, L, d)", ha="center", fontsize=9)
    ax.text(7.55, 3.05, "...", fontsize=18, ha="center", va="center")
    box(ax, 2.5, 4.3, 6.8, 0.6, "拼接：(B, L, H·d) = (B, L, h)", "#eeeeee", 10)
    for i in range(heads):
        link(ax, (xs[i] + 1.5, 3.85), (2.5 + 6.8 * (i + 0.5) / heads, 4.25))
    box(ax, 4.4, 5.4, 3.0, 0.6, "$W_o$：h → h", "#dadaeb", 10)
    link(ax, (5.9, 4.95), (5.9, 5.35))
    ax.text(5.9, 6.45, "输出 (B, L, h)", ha="center", fontsize=10, weight="bold")
    link(ax, (5.9, 6.05), (5.9, 6.38))
    ax.text(11.6, 2.4, "每个头拥有\nW_q、W_k、W_v\n输出中的 d = h / H 维",
            fontsize=9, color="dimgray", va="center")
    ax.set_xlim(0, 13.4)
    ax.set_ylim(-0.1, 6.9)
    ax.axis("off")
    fig.savefig(HERE / "04_multihead.png", dpi=135, bbox_inches="tight",
                facecolor="white")
    plt.close(fig)


if __name__ == "__main__":
    transpose_qkv_diagram()
    multihead_diagram()
