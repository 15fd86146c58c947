"""Make the diagram of deck 05 (self-attention and positional encoding).

    .venv/bin/python img/05_diagrams.py

writes 05_three_attentions.png next to this script: where the Transformer
uses attention -- encoder self-attention, decoder causal self-attention and
encoder-decoder (cross) attention -- with the mask each one uses, drawn as a
small grid (rows = queries, columns = keys; filled = allowed).
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
ALLOWED, MASKED = "#de2d26", "#f0f0f0"


def box(ax, x, y, w, h, text, colour, fontsize=10, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h,
                                boxstyle="round,pad=0.05,rounding_size=0.15",
                                facecolor=colour, edgecolor="#333333",
                                linewidth=1.3))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center",
            fontsize=fontsize, weight=weight)


def link(ax, p0, p1, text=None, colour="#333333", offset=(0.12, 0.0),
         connectionstyle="arc3"):
    ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=13,
                                 linewidth=1.3, color=colour,
                                 connectionstyle=connectionstyle))
    if text:
        ax.text((p0[0] + p1[0]) / 2 + offset[0], (p0[1] + p1[1]) / 2 + offset[1],
                text, fontsize=9, color=colour, ha="left", va="center")


def mask_icon(ax, x, y, allowed, title, cell=0.22):
    """allowed: list of rows of 0/1; drawn with its top-left corner at (x, y)."""
    for i, row in enumerate(allowed):
        for j, ok in enumerate(row):
            ax.add_patch(Rectangle((x + j * cell, y - (i + 1) * cell), cell, cell,
                                   facecolor=ALLOWED if ok else MASKED,
                                   edgecolor="white", linewidth=0.8))
    width = len(allowed[0]) * cell
    ax.text(x + width / 2, y + 0.12, title, ha="center", va="bottom",
            fontsize=9.5, color="dimgray")
    ax.text(x - 0.08, y - len(allowed) * cell / 2, "查询", rotation=90,
            ha="right", va="center", fontsize=8.5, color="dimgray")
    ax.text(x + width / 2, y - len(allowed) * cell - 0.06, "键", ha="center",
            va="top", fontsize=8.5, color="dimgray")


def three_attentions():
    fig, ax = plt.subplots(figsize=(11, 5.0))
    enc_x, dec_x, w = 0.8, 7.6, 4.0
    # encoder: input -> (1) self-attention -> feed-forward -> memory
    box(ax, enc_x - 0.3, 0.9, w + 0.6, 3.3, "", "#f7fbff")
    ax.text(enc_x + w / 2, 3.75, "编码器", ha="center", fontsize=13,
            weight="bold")
    box(ax, enc_x, -0.9, w, 0.8, "源序列词元\n+ 位置编码",
        "#ffffff", 9)
    box(ax, enc_x, 1.3, w, 0.8, "(1) 自注意力", "#9ecae1", 11, "bold")
    box(ax, enc_x, 2.6, w, 0.55, "前馈网络", "#eeeeee", 9)
    link(ax, (enc_x + w / 2, -0.05), (enc_x + w / 2, 1.25), "Q = K = V")
    link(ax, (enc_x + w / 2, 2.15), (enc_x + w / 2, 2.55))
    ax.text(enc_x + w / 2, 4.75, "编码器输出（memory）", ha="center",
            va="center", fontsize=9.5, weight="bold", color="#238b45")
    link(ax, (enc_x + w / 2, 4.25), (enc_x + w / 2, 4.55), colour="#238b45")
    # decoder: input -> (2) causal self-attention -> (3) cross -> feed-forward
    box(ax, dec_x - 0.3, 0.9, w + 0.6, 4.6, "", "#fff5eb")
    ax.text(dec_x + w / 2, 5.05, "解码器", ha="center", fontsize=13,
            weight="bold")
    box(ax, dec_x, -0.9, w, 0.8, "目标序列词元（右移一位）\n"
        "+ 位置编码", "#ffffff", 9)
    box(ax, dec_x, 1.3, w, 0.8, "(2) 掩蔽自注意力", "#fdae6b", 11,
        "bold")
    box(ax, dec_x, 2.7, w, 0.8, "(3) 编码器－解码器注意力", "#a1d99b", 11, "bold")
    box(ax, dec_x, 4.0, w, 0.55, "前馈网络", "#eeeeee", 9)
    link(ax, (dec_x + w / 2, -0.05), (dec_x + w / 2, 1.25), "Q = K = V")
    link(ax, (dec_x + w / 2, 2.15), (dec_x + w / 2, 2.65), "Q")
    link(ax, (dec_x + w / 2, 3.55), (dec_x + w / 2, 3.95))
    # memory -> keys and values of the cross-attention
    link(ax, (enc_x + w + 0.05, 4.75), (dec_x - 0.05, 3.1), "K = V",
         colour="#238b45", offset=(-0.2, 0.45))
    # mask icons (rows = queries, columns = keys)
    n, pad, T = 6, 2, 5            # as in the deck: source 6 slots (last 2 padding), target 5
    mask_icon(ax, enc_x + w + 0.95, 2.3,
              [[1] * (n - pad) + [0] * pad for _ in range(n)],
              "填充掩蔽\nL = S = 6")
    mask_icon(ax, dec_x + w + 0.85, 1.8,
              [[1 if j <= i else 0 for j in range(T)] for i in range(T)],
              "因果掩蔽\nL = S = 5")
    mask_icon(ax, dec_x + w + 0.85, 4.2,
              [[1] * (n - pad) + [0] * pad for _ in range(T)],
              "填充掩蔽\nL = 5, S = 6")
    ax.set_xlim(0.2, 13.8)
    ax.set_ylim(-1.0, 5.7)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(HERE / "05_three_attentions.png", dpi=132, bbox_inches="tight",
                facecolor="white")
    plt.close(fig)


if __name__ == "__main__":
    three_attentions()
