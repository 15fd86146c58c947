"""Make the diagram of deck 06 (Bahdanau attention).

    .venv/bin/python img/06_diagrams.py

writes 06_bottleneck.png next to this script. Two panels, the same RNN
encoder in both:
  (a) the plain encoder-decoder: only the last encoder state reaches the
      decoder, as one context variable c used at every decoding step;
  (b) Bahdanau attention: at decoding step t' the previous decoder state
      s_{t'-1} is the query, every encoder state h_t is a key and a value,
      and the context c_{t'} is their weighted sum (line width ~ weight).
Every label is Chinese (d2l-zh terms), drawn with a CJK font fallback.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent
# CJK fonts on Linux, macOS, Windows (the first installed one wins), as in attention_utils.
plt.rcParams["font.sans-serif"] = ["Noto Sans CJK SC", "PingFang SC", "Heiti SC",
                                   "Microsoft YaHei", "SimHei", "DejaVu Sans"]
plt.rcParams["axes.unicode_minus"] = False
plt.rcParams["mathtext.fontset"] = "dejavusans"
ENCODER, DECODER, CONTEXT, ATTENTION = "#c6dbef", "#fdd0a2", "#fc9272", "#a1d99b"
DARK = "#333333"


def box(ax, x, y, w, h, text, colour, fontsize=12, weight="normal"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle="round,pad=0.03,rounding_size=0.12",
                                facecolor=colour, edgecolor=DARK, linewidth=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, weight=weight)


def arrow(ax, p0, p1, colour=DARK, width=1.2, style="-|>", rad=0.0):
    ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle=style, mutation_scale=12,
                                 linewidth=width, color=colour, shrinkA=2, shrinkB=2,
                                 connectionstyle=f"arc3,rad={rad}"))


def encoder(ax, xs, y=0.0):
    """Source tokens and the encoder's hidden states h_1..h_T along the bottom."""
    for t, x in enumerate(xs, start=1):
        ax.text(x, y - 1.05, f"$x_{t}$", ha="center", va="center", fontsize=12)
        arrow(ax, (x, y - 0.8), (x, y - 0.33))
        box(ax, x, y, 0.8, 0.6, f"$h_{t}$", ENCODER, 13)
        if t > 1:
            arrow(ax, (xs[t - 2] + 0.42, y), (x - 0.42, y))
    ax.text(xs[0] - 0.75, y, "编码器", ha="right", va="center", fontsize=11,
            color="#08519c", weight="bold")


def plain(ax):
    xs = [0.0, 1.2, 2.4, 3.6, 4.8]
    encoder(ax, xs)
    # only the last state becomes the context variable
    box(ax, xs[-1], 1.55, 1.5, 0.62, "上下文 $c$", CONTEXT, 12, "bold")
    arrow(ax, (xs[-1], 0.32), (xs[-1], 1.22))
    ax.text(xs[-1] + 0.85, 1.55, "瓶颈", ha="left", va="center",
            fontsize=12, color="#a50f15", weight="bold")
    ds = [0.6, 1.8, 3.0]
    for k, x in enumerate(ds, start=1):
        box(ax, x, 3.1, 0.8, 0.6, f"$s_{k}$", DECODER, 13)
        arrow(ax, (x, 3.42), (x, 3.85))
        ax.text(x, 4.05, f"$y_{k}$", ha="center", va="center", fontsize=12)
        arrow(ax, (xs[-1] - 0.45, 1.86), (x + 0.1, 2.78), colour="#cb181d", width=1.4)
        if k > 1:
            arrow(ax, (ds[k - 2] + 0.42, 3.1), (x - 0.42, 3.1))
    ax.text(ds[0] - 0.75, 3.1, "解码器", ha="right", va="center", fontsize=11,
            color="#a63603", weight="bold")
    ax.text(-1.6, 1.55, "每一步都用\n同一个 $c$", ha="left", va="center", fontsize=11,
            color="#a50f15")
    ax.set_title("(a) 没有注意力：整句只剩最后一个隐状态", fontsize=13, pad=8)


def bahdanau(ax):
    xs = [0.0, 1.2, 2.4, 3.6, 4.8]
    encoder(ax, xs)
    weights = [0.05, 0.1, 0.7, 0.1, 0.05]          # an illustrative alignment
    box(ax, 2.4, 1.7, 2.4, 0.62, "加性注意力", ATTENTION, 12, "bold")
    for x, a in zip(xs, weights):
        arrow(ax, (x, 0.32), (2.4 + (x - 2.4) * 0.35, 1.38), colour="#238b45",
              width=0.6 + 6 * a, style="-")
    ax.text(4.35, 0.95, r"键 = 值 = $h_t$", ha="left", va="center", fontsize=10.5,
            color="#238b45")
    ax.text(3.75, 1.85, "线宽 = 注意力权重\n" r"$\alpha(s_{t'-1}, h_t)$", ha="left",
            va="center", fontsize=10.5, color="#238b45")
    # previous decoder state = query; context c_t' (+ y_t'-1, + s_t'-1) -> GRU -> s_t'
    box(ax, 0.2, 3.1, 1.1, 0.6, r"$s_{t'-1}$", DECODER, 13)
    ax.text(-0.5, 2.3, "查询", ha="center", va="center", fontsize=11, color="#a63603",
            weight="bold")
    arrow(ax, (0.35, 2.78), (1.45, 1.99), colour="#a63603", width=1.4)
    box(ax, 2.4, 3.1, 1.3, 0.6, r"$c_{t'}$", CONTEXT, 13, "bold")
    arrow(ax, (2.4, 2.03), (2.4, 2.78))
    box(ax, 4.6, 3.1, 1.0, 0.6, r"$s_{t'}$", DECODER, 13)
    arrow(ax, (3.08, 3.1), (4.08, 3.1))
    ax.text(3.58, 2.8, "GRU", ha="center", va="center", fontsize=9.5, color=DARK)
    arrow(ax, (0.3, 3.42), (4.5, 3.42), colour="#a63603", width=1.0, rad=-0.25)
    ax.text(2.4, 4.05, "隐状态传给下一步", ha="center", va="center", fontsize=9.5,
            color="#a63603")
    arrow(ax, (4.6, 3.42), (4.6, 3.85))
    ax.text(4.6, 4.05, r"$y_{t'}$", ha="center", va="center", fontsize=12)
    ax.set_title(r"(b) Bahdanau 注意力：每一步重新汇聚所有 $h_t$", fontsize=13, pad=8)


def bottleneck():
    fig, axes = plt.subplots(1, 2, figsize=(12.6, 4.3))
    plain(axes[0])
    bahdanau(axes[1])
    for ax in axes:
        ax.set_xlim(-1.8, 6.6)
        ax.set_ylim(-1.35, 4.3)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.tight_layout(w_pad=0.5)
    fig.savefig(HERE / "06_bottleneck.png", dpi=110, bbox_inches="tight",
                facecolor="white")
    plt.close(fig)


if __name__ == "__main__":
    bottleneck()
