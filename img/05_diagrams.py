"""Make the diagram of deck 05 (self-attention and positional encoding).

    .venv/bin/python img/05_diagrams.py

writes 05_three_attentions.png next to this script: where the Transformer
uses attention -- encoder self-attention, decoder masked (causal)
self-attention and encoder-decoder (cross) attention -- with the mask each
one uses in the deck's toy example, drawn as a small grid (rows = queries,
columns = keys; red = allowed, grey = masked).

The figure is drawn in the course figure style of attention_utils (CJK
fonts, sizes) and saved with ``au._png``, so the PNG carries the figure
report that tests/test_lecture_rules.py reads. Every text is at least 14 pt
at 100 dpi (19 px) in a PNG narrower than the slide, and dark on white.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import attention_utils as au  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

ALLOWED, MASKED, INK = "#c0272d", "#d9d9d9", "#222222"
SMALL, MEDIUM, LARGE = 14, 15, 17          # pt; the smallest is 19 px at 100 dpi
ICON = 16                                  # pt, the mask grids' labels: about as large as the boxes' text


def box(ax, x, y, w, h, text, colour, size=MEDIUM, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04,rounding_size=0.12",
                                facecolor=colour, edgecolor="#333333", linewidth=1.4))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", size=size,
            weight=weight, color=INK)


def link(ax, p0, p1, text=None, colour="#333333", text_at=None, ha="left"):
    ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=16,
                                 linewidth=1.6, color=colour))
    if text:
        x, y = text_at or ((p0[0] + p1[0]) / 2 + 0.12, (p0[1] + p1[1]) / 2)
        ax.text(x, y, text, size=SMALL, color=colour, ha=ha, va="center")


def mask_icon(ax, x, y, allowed, title, cell=0.22):
    """allowed: rows (queries) of 0/1 over columns (keys); top-left corner at (x, y)."""
    for i, row in enumerate(allowed):
        for j, ok in enumerate(row):
            ax.add_patch(Rectangle((x + j * cell, y - (i + 1) * cell), cell, cell,
                                   facecolor=ALLOWED if ok else MASKED,
                                   edgecolor="white", linewidth=1.0))
    width, height = len(allowed[0]) * cell, len(allowed) * cell
    ax.text(x + width / 2, y + 0.08, title, ha="center", va="bottom", size=ICON, color=INK)
    ax.text(x - 0.08, y - height / 2, "查询", rotation=90, ha="right", va="center",
            size=ICON, color=INK)
    ax.text(x + width / 2, y - height - 0.05, "键", ha="center", va="top", size=ICON, color=INK)


def three_attentions():
    fig, ax = plt.subplots(figsize=(12, 5.45))
    enc_x, dec_x, w = 0.3, 6.4, 3.6
    # encoder: source tokens -> (1) self-attention -> feed-forward -> memory
    box(ax, enc_x - 0.2, 0.7, w + 0.4, 2.95, "", "#eef5fb")
    ax.text(enc_x + w / 2, 3.3, "编码器", ha="center", va="center", size=LARGE,
            weight="bold", color=INK)
    box(ax, enc_x, -0.75, w, 0.75, "源序列词元 + 位置编码", "#ffffff")
    box(ax, enc_x, 0.95, w, 0.75, "(1) 自注意力", "#9ecae1", LARGE, "bold")
    box(ax, enc_x, 2.15, w, 0.55, "前馈网络", "#eeeeee")
    link(ax, (enc_x + w / 2, 0.05), (enc_x + w / 2, 0.9), "Q = K = V")
    link(ax, (enc_x + w / 2, 1.75), (enc_x + w / 2, 2.1))
    link(ax, (enc_x + w / 2, 3.7), (enc_x + w / 2, 4.15), colour="#1b7837")
    ax.text(enc_x + w / 2, 4.4, "编码器输出（memory）", ha="center", va="center",
            size=MEDIUM, weight="bold", color="#1b7837")
    # decoder: target tokens -> (2) masked self-attention -> (3) cross -> feed-forward
    box(ax, dec_x - 0.2, 0.7, w + 0.4, 4.6, "", "#fdf3e7")
    ax.text(dec_x + w / 2, 4.95, "解码器", ha="center", va="center", size=LARGE,
            weight="bold", color=INK)
    box(ax, dec_x, -0.75, w, 0.75, "目标序列词元 + 位置编码", "#ffffff")
    box(ax, dec_x, 0.95, w, 0.75, "(2) 掩蔽自注意力", "#fdae6b", LARGE, "bold")
    box(ax, dec_x, 3.05, w, 0.75, "(3) 编码器－解码器注意力", "#a1d99b", MEDIUM, "bold")
    box(ax, dec_x, 4.2, w, 0.45, "前馈网络", "#eeeeee")
    link(ax, (dec_x + w / 2, 0.05), (dec_x + w / 2, 0.9), "Q = K = V")
    link(ax, (dec_x + w / 2, 1.75), (dec_x + w / 2, 3.0), "Q")
    link(ax, (dec_x + w / 2, 3.85), (dec_x + w / 2, 4.15))
    # memory -> keys and values of the cross-attention
    link(ax, (enc_x + w / 2 + 1.75, 4.4), (dec_x - 0.05, 3.45), "K = V", colour="#1b7837",
         text_at=(5.05, 4.15))
    # mask icons of the deck's toy example (rows = queries, columns = keys), each level
    # with the block that uses it
    n, pad, T = 6, 2, 5            # source: 6 slots, the last 2 padding; target: 5 tokens
    mask_icon(ax, enc_x + w + 0.75, 1.325 + 3 * 0.22, [[1] * (n - pad) + [0] * pad for _ in range(n)],
              "填充掩蔽\n$L = S = 6$")
    mask_icon(ax, dec_x + w + 0.75, 1.325 + 2.5 * 0.22, [[int(j <= i) for j in range(T)] for i in range(T)],
              "因果掩蔽\n$L = S = 5$")
    mask_icon(ax, dec_x + w + 0.75, 3.425 + 2.5 * 0.22 + 0.15,  # raised: clear of the causal title
              [[1] * (n - pad) + [0] * pad for _ in range(T)],
              "填充掩蔽\n$L = 5,\\ S = 6$")
    ax.set_xlim(0, 12.3)         # the right-hand icon ends at x = 12.07: keep its last column and label
    ax.set_ylim(-0.85, 5.4)
    ax.set_aspect("equal")
    ax.axis("off")
    out = HERE / "05_three_attentions.png"
    out.write_bytes(au._png(fig))
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(three_attentions())
