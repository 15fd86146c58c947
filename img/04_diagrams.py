"""Make the diagrams of deck 04 (multi-head attention).

    .venv/bin/python img/04_diagrams.py

writes, next to this script:

* 04_multihead.png -- the data flow of multi-head attention: per head i the
  projections W_i^(q), W_i^(k), W_i^(v), one scaled dot-product attention,
  head_i of width d; concatenation to h = H*d; output projection W_o.
  Heads are numbered 0 .. H-1, as in the deck's formula and code.
* 04_transpose_qkv.png -- where each entry of X (B, n, H*d) goes in
  transpose_qkv: (B, n, H*d) -> (B, H, n, d) -> (B*H, n, d), and back
  (transpose_output). Every panel holds both sequences b = 0 and b = 1;
  the arrows between panels give the direction. Rows of the first panel are
  labelled with the time step t. Cell labels are the values of
  the deck's tiny tensor X[b, t, c] = 100b + 10t + c.

The figures are drawn in the course figure style of attention_utils (fonts,
sizes, CJK fallback) and saved with au._png, so each PNG carries the figure
report that tests/test_lecture_rules.py reads (smallest text as displayed).
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import attention_utils as au  # noqa: E402  (sets the course style and CJK fonts)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

INK = "#111827"                              # all text: near black
HEAD_FILL = ["#bfdbfe", "#fed7aa", "#bbf7d0"]  # head 0 blue, head 1 orange, head H-1 green
HEAD_EDGE = ["#1d4ed8", "#c2410c", "#15803d"]
BATCH_EDGE = {0: INK, 1: INK}                 # frame of sequence b: neutral ink (colour means head)
BATCH_STYLE = {0: "solid", 1: (0, (3, 1.5))}  # b = 0 solid frame, b = 1 dashed frame
FORWARD, BACKWARD = "#111827", "#6d28d9"      # transpose_qkv black, transpose_output purple
INPUT_COLOUR = {"q": "#0e7490", "k": "#7e22ce", "v": "#be123c"}  # fan-in lines: one colour per input
B, N, H, D = 2, 3, 2, 2                       # the deck's tiny tensor


def save(fig, name):
    (HERE / name).write_bytes(au._png(fig))
    plt.close(fig)


def canvas(width, height, xlim, ylim):
    """One axes filling the figure, equal units, y upwards."""
    fig = plt.figure(figsize=(width, height), layout="none")
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def arrow(ax, start, end, colour=INK, width=1.8):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=18,
                                 linewidth=width, color=colour, shrinkA=0, shrinkB=0))


# ---------------------------------------------------------------- data flow

# Mathtext draws sub- and superscripts at 70 % of the text size; labels with
# them (W_i^(q), head_i, W_o) are set this large so the scripts stay >= 16 px
# on a slide (the figure report only sees the base size).
SCRIPTED = 18
BOX_TEXT = 16                                 # plain box labels: above the 14 pt default, ~22 px on a slide


def box(ax, x, y, w, h, text, fill, edge=INK, size=None):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                                facecolor=fill, edgecolor=edge, linewidth=1.6))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", color=INK, size=size)


def multihead_diagram():
    fig, ax = canvas(11.6, 5.3, (0, 14.5), (0, 6.6))
    heads = [0, 1, "H-1"]
    left = [0.3, 5.0, 9.9]                   # left edge of each head's column
    w_box, gap = 1.35, 0.1                    # projection boxes
    inputs = {"q": (2.3, "查询 $\\mathbf{q}$"), "k": (7.0, "键 $\\mathbf{k}$"),
              "v": (11.7, "值 $\\mathbf{v}$")}
    for name, (x, text) in inputs.items():
        ax.text(x, 0.25, text, ha="center", va="center", color=INPUT_COLOUR[name], weight="bold",
                size=BOX_TEXT)
    for col, (x0, head) in enumerate(zip(left, heads)):
        for j, name in enumerate("qkv"):
            x = x0 + j * (w_box + gap)
            box(ax, x, 1.15, w_box, 0.75, f"$\\mathbf{{W}}_{{{head}}}^{{({name})}}$",
                HEAD_FILL[col], HEAD_EDGE[col], size=SCRIPTED)
            arrow(ax, (inputs[name][0], 0.55), (x + w_box / 2, 1.12), colour=INPUT_COLOUR[name],
                  width=2.2)          # coloured by input, so the crossing lines can be followed
            arrow(ax, (x + w_box / 2, 1.92), (x0 + 2.1, 2.55))
        box(ax, x0, 2.6, 4.25, 0.8, "缩放点积注意力", HEAD_FILL[col], HEAD_EDGE[col],
            size=BOX_TEXT)
        ax.text(x0 + 2.1, 3.75, f"$\\mathrm{{head}}_{{{head}}}$：(B, L, $d = h/H$)", ha="center",
                va="center", color=INK, size=SCRIPTED)
    ax.text(9.62, 3.0, "…", ha="center", va="center", color=INK, weight="bold")
    box(ax, 2.6, 4.55, 9.3, 0.75, "拼接：(B, L, $H\\cdot d$) = (B, L, $h$)", "#e5e7eb", size=BOX_TEXT)
    for x0 in left:
        arrow(ax, (x0 + 2.1, 4.0), (x0 + 2.1 + 0.3 * (7.25 - x0 - 2.1), 4.52))
    box(ax, 5.2, 5.75, 4.1, 0.7, "$\\mathbf{W}_o$：$h\\to h$", "#ddd6fe", size=SCRIPTED)
    arrow(ax, (7.25, 5.32), (7.25, 5.72))
    arrow(ax, (9.32, 6.1), (10.3, 6.1))
    ax.text(10.4, 6.1, "输出 (B, L, $h$)", ha="left", va="center", color=INK, weight="bold",
            size=BOX_TEXT)
    au.describe(fig, "示意图：多头注意力的数据流。查询 q、键 k、值 v 分别送进每个头 i（头 0、头 1 …… 头 H-1）"
                     "自己的投影矩阵 W_i^(q)、W_i^(k)、W_i^(v)（青、紫、红三色的线分别来自 q、k、v），每个头做一次缩放点积注意力，得到 (B, L, d) 的 head_i（每个头 d = h/H 维）；"
                     "H 个头拼接成 (B, L, H·d) = (B, L, h)，再乘 W_o（h 到 h），得到输出 (B, L, h)。")
    save(fig, "04_multihead.png")


# ---------------------------------------------------------------- transpose_qkv

CELL_W, CELL_H = 1.25, 1.0


def cell(ax, x, y, b, t, c, head):
    """The cell holding X[b, t, c], lower-left corner (x, y)."""
    ax.add_patch(Rectangle((x, y), CELL_W, CELL_H, facecolor=HEAD_FILL[head],
                           edgecolor="white", linewidth=2))
    ax.text(x + CELL_W / 2, y + CELL_H / 2, f"{100 * b + 10 * t + c}", ha="center",
            va="center", color=INK, family="monospace")


def frame(ax, x, y, columns, rows, b):
    ax.add_patch(Rectangle((x - 0.07, y - 0.07), columns * CELL_W + 0.14, rows * CELL_H + 0.14,
                           fill=False, edgecolor=BATCH_EDGE[b], linewidth=2.6,
                           linestyle=BATCH_STYLE[b]))


def transpose_qkv_diagram():
    top = 13.0                                # top edge of the cell area
    block_gap = 0.2                           # between the four blocks of panel 3
    panel3_height = B * H * N * CELL_H + (B * H - 1) * block_gap
    middle = top - panel3_height / 2          # arrows run here, between b = 0 and b = 1
    batch_gap = 1.0                           # between b = 0 and b = 1 in panels 1 and 2
    y_batch = {0: middle + batch_gap / 2, 1: middle - batch_gap / 2 - N * CELL_H}  # lower edges
    fig, ax = canvas(12.0, 5.37, (-2.9, 28.6), (-1.95, top + 1.15))

    # panel 1: X (B, n, H*d)
    x1 = 0.0
    ax.text(x1 + 2 * CELL_W, top + 0.6, "X：(B, n, $H\\cdot d$)", ha="center", color=INK,
            weight="bold")
    ax.text(x1 - 0.3, y_batch[0] + N * CELL_H + 0.5, "列 $c$", ha="right", va="center",
            color=INK)
    for c in range(H * D):
        ax.text(x1 + (c + 0.5) * CELL_W, y_batch[0] + N * CELL_H + 0.5, f"{c}",
                ha="center", va="center", color=INK)
    for b in range(B):
        for t in range(N):
            for c in range(H * D):
                cell(ax, x1 + c * CELL_W, y_batch[b] + (N - 1 - t) * CELL_H, b, t, c, c // D)
        frame(ax, x1, y_batch[b], H * D, N, b)
        ax.text(x1 - 2.3, y_batch[b] + N * CELL_H / 2, f"$b={b}$", ha="center", va="center",
                color=BATCH_EDGE[b], rotation=90)
        for t in range(N):                    # row labels: time step t
            ax.text(x1 - 0.2, y_batch[b] + (N - 1 - t + 0.5) * CELL_H, f"$t={t}$", ha="right",
                    va="center", color=INK)

    # panel 2: (B, H, n, d), the modern layout
    x2 = 9.5
    head_gap = 0.5
    ax.text(x2 + 2.7, top + 0.6, "(B, $H$, n, $d$)：现代布局", ha="center", color=INK,
            weight="bold")
    for i in range(H):
        xi = x2 + i * (D * CELL_W + head_gap)
        ax.text(xi + D * CELL_W / 2, y_batch[0] + N * CELL_H + 0.5, f"头 {i}", ha="center",
                va="center", color=HEAD_EDGE[i], weight="bold")
        for b in range(B):
            for t in range(N):
                for j in range(D):
                    cell(ax, xi + j * CELL_W, y_batch[b] + (N - 1 - t) * CELL_H, b, t,
                         i * D + j, i)
            frame(ax, xi, y_batch[b], D, N, b)

    # panel 3: (B*H, n, d), the book's layout
    x3 = 19.2
    ax.text(x3 + 2.2, top + 0.6, "($B\\cdot H$, n, $d$)：书的布局", ha="center", color=INK,
            weight="bold")
    for row in range(B * H):
        b, i = divmod(row, H)
        y_row = top - (row + 1) * N * CELL_H - row * block_gap
        for t in range(N):
            for j in range(D):
                cell(ax, x3 + j * CELL_W, y_row + (N - 1 - t) * CELL_H, b, t, i * D + j, i)
        frame(ax, x3, y_row, D, N, b)
        ax.text(x3 + D * CELL_W + 0.3, y_row + N * CELL_H / 2, f"第 {row} 片：序列 {b} 的头 {i}", ha="left",
                va="center", color=BATCH_EDGE[b], weight="bold")

    # arrows: transpose_qkv left to right above the middle, transpose_output back below it
    for start, end, forward, backward in [
            (x1 + H * D * CELL_W + 0.3, x2 - 0.3, "reshape\n+ permute", "permute\n+ reshape\n（复制）"),
            (x2 + 2 * D * CELL_W + head_gap + 0.3, x3 - 0.3, "reshape\n（复制）", "reshape")]:
        arrow(ax, (start, middle + 0.2), (end, middle + 0.2), FORWARD)
        ax.text((start + end) / 2, middle + 0.4, forward, ha="center", va="bottom",
                color=FORWARD, linespacing=1.1)
        arrow(ax, (end, middle - 0.2), (start, middle - 0.2), BACKWARD)
        ax.text((start + end) / 2, middle - 0.4, backward, ha="center", va="top",
                color=BACKWARD, linespacing=1.1)

    ax.text(-2.8, -0.5, "黑箭头：transpose_qkv（从左到右）    紫箭头：transpose_output（原路返回）",
            ha="left", va="center", color=INK)
    ax.text(-2.8, -1.5, "格子里的数 $X[b,t,c]=100b+10t+c$    底色：头    框：实线 $b=0$，虚线 $b=1$",
            ha="left", va="center", color=INK)
    au.describe(fig, "示意图：transpose_qkv 把每个数放到哪里。左：X 形状 (B, n, H·d) = (2, 3, 4)，每行标着时间步 t，格子里是 100b+10t+c，"
                     "第 0、1 列属于头 0，第 2、3 列属于头 1。中：reshape 加 permute 得到现代布局 (B, H, n, d)，"
                     "每个序列拆成头 0、头 1 两块。右：再 reshape（复制一份）得到书的布局 (B·H, n, d)，"
                     "第 0 到 3 片（沿第 0 维）依次是序列 0 的头 0、序列 0 的头 1、序列 1 的头 0、序列 1 的头 1。"
                     "反向箭头是 transpose_output，原路返回；左段的 reshape 也复制一份。")
    save(fig, "04_transpose_qkv.png")


if __name__ == "__main__":
    multihead_diagram()
    transpose_qkv_diagram()
