"""Make the diagrams of deck 07 (Transformer).

    .venv/bin/python img/07_diagrams.py

writes, next to this script:

* 07_transformer.png -- the encoder block and the decoder block, stacked
  num_layers times, with the three uses of attention numbered and coloured:
  (1) encoder self-attention, (2) decoder masked (causal) self-attention,
  (3) encoder-decoder attention, and where each one's queries, keys and
  values come from;
* 07_kv_cache.png -- one decoding step (the 3rd) of one decoder block, twice:
  left, what this module (like the book) caches in state[2][i]: the block's
  INPUTS, so W_k and W_v project every cached row again at every step (and
  the encoder outputs too; the projection box is neutral and says that 2 of
  its 3 rows are recomputed, and the keys and values of those earlier rows are
  drawn in the "repeated" colour); right, what production decoders cache: the
  projected keys and values, so only the new row is projected.

Both are drawn in the course figure style of attention_utils (fonts, CJK
fallback) at 100 dpi, one data unit = one inch, and saved with its figure
report, so tests/test_lecture_rules.py can check that every text is at least
16 px tall on a 1280x720 slide. Every text is dark (INK) on a light fill.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import attention_utils as au  # noqa: E402  (sets the course style and the CJK fonts)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

ENC_SELF, DEC_SELF, CROSS = "#9ecae1", "#fdae6b", "#a1d99b"   # the three attentions
NORM, FFN, PLAIN = "#ece7f2", "#e0e0e0", "#ffffff"
OLD, NEW, WASTE, ONCE = "#cfcfcf", "#fdae6b", "#fb6a4a", "#a1d99b"  # cache diagram
INK, MEMORY = "#222222", "#1b7837"


def canvas(width, height):
    """A figure whose data units are inches (100 dpi: 1 unit = 100 px)."""
    fig = plt.figure(figsize=(width, height), layout="none")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def box(ax, x0, y0, w, h, text, colour, fontsize=14, weight="normal", linestyle="-",
        edge=INK):
    ax.add_patch(FancyBboxPatch((x0, y0), w, h, boxstyle="round,pad=0,rounding_size=0.08",
                                facecolor=colour, edgecolor=edge, linewidth=1.4,
                                linestyle=linestyle))
    if text:
        ax.text(x0 + w / 2, y0 + h / 2, text, ha="center", va="center", fontsize=fontsize,
                weight=weight, color=INK)


def arrow(ax, p0, p1, colour=INK, rad=0.0, lw=1.6):
    ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=15, linewidth=lw,
                                 color=colour, shrinkA=1, shrinkB=1,
                                 connectionstyle=f"arc3,rad={rad}"))


def save(fig, name):
    (HERE / name).write_bytes(au._png(fig))
    plt.close(fig)


# ---------------------------------------------------------------- the model

SUBLAYER_H, NORM_H, STEP = 0.45, 0.34, 1.05
STACKED = "× N\n（num_layers）"          # the same label on both stacks


def stack(ax, x, w, y, sublayers):
    """One block: each (text, colour) sublayer, then its AddNorm, with the
    residual connection drawn on the left. Returns the top of the block."""
    for text, colour in sublayers:
        box(ax, x, y, w, SUBLAYER_H, text, colour, 15, "bold")
        box(ax, x, y + 0.6, w, NORM_H, "加法和规范化（AddNorm）", NORM, 13)
        arrow(ax, (x + w / 2, y - 0.16), (x + w / 2, y))
        arrow(ax, (x + w / 2, y + SUBLAYER_H), (x + w / 2, y + 0.6))
        skip_x, top = x - 0.22, y + 0.6 + NORM_H / 2
        ax.plot([x + w / 2, skip_x, skip_x], [y - 0.1, y - 0.1, top], color=INK, lw=1.2)
        arrow(ax, (skip_x, top), (x, top), lw=1.2)
        y += STEP
    return y - STEP + 0.6 + NORM_H


def column(ax, x, w, sublayers, name, inputs):
    """Inputs, embedding, the dashed block of sublayers; returns its top."""
    ax.text(x + w / 2, 0.14, inputs, ha="center", va="center", fontsize=13, color=INK)
    arrow(ax, (x + w / 2, 0.28), (x + w / 2, 0.48))
    box(ax, x, 0.48, w, 0.42, r"嵌入 × $\sqrt{d}$ ＋ 位置编码", PLAIN, 14)
    top = stack(ax, x, w, 1.35, sublayers)
    box(ax, x - 0.4, 1.08, w + 0.65, top - 0.95, "", "none", linestyle="--")
    ax.text(x - 0.5, top + 0.1, name, ha="right", va="top", fontsize=16, weight="bold",
            color=INK)
    return top + 0.13


def transformer():
    fig, ax = canvas(12, 5.4)
    w, enc_x, dec_x = 3.3, 1.35, 7.45
    enc_top = column(ax, enc_x, w, [("① 多头自注意力", ENC_SELF), ("基于位置的前馈网络", FFN)],
                     "编码器", "源序列词元（填充到 num_steps）")
    ax.text(enc_x + w + 0.3, 1.75, STACKED, ha="left", va="center", fontsize=14, color=INK)
    ax.text(enc_x + w / 2 + 0.6, enc_top + 0.55, "编码器输出 enc_outputs", ha="center",
            va="center", fontsize=14, weight="bold", color=MEMORY)
    arrow(ax, (enc_x + w / 2, enc_top), (enc_x + w / 2, enc_top + 0.4), colour=MEMORY)
    dec_top = column(ax, dec_x, w, [("② 掩蔽多头自注意力", DEC_SELF),
                                    ("③ 编码器－解码器注意力", CROSS),
                                    ("基于位置的前馈网络", FFN)],
                     "解码器", "目标词元（右移一位，<bos> 开头）")
    ax.text(dec_x + w + 0.3, 2.85, STACKED, ha="left", va="center", fontsize=14, color=INK)
    box(ax, dec_x, dec_top + 0.25, w, 0.42, "全连接层 → 词表上的预测", PLAIN, 14)
    arrow(ax, (dec_x + w / 2, dec_top), (dec_x + w / 2, dec_top + 0.25))
    cross_y = 1.35 + STEP + SUBLAYER_H / 2                      # middle of sublayer ③
    arrow(ax, (enc_x + w / 2 + 2.15, enc_top + 0.45), (dec_x - 0.02, cross_y),
          colour=MEMORY, rad=-0.25, lw=2.4)
    ax.text(6.25, 3.1, "作键和值", ha="center", va="center", fontsize=14, weight="bold",
            color=MEMORY)
    notes = [(ENC_SELF, "① 查询、键、值：都是这一块的输入（遮填充）"),
             (DEC_SELF, "② 查询、键、值：都是这一块的输入（因果掩蔽）"),
             (CROSS, "③ 查询：解码器；键和值：编码器输出（遮填充）")]
    for k, (colour, text) in enumerate(notes):
        y = 5.25 - 0.38 * k
        ax.add_patch(Rectangle((0.1, y - 0.13), 0.26, 0.26, facecolor=colour, edgecolor=INK))
        ax.text(0.5, y, text, ha="left", va="center", fontsize=14, color=INK)
    save(fig, "07_transformer.png")


# ---------------------------------------------------------------- the cache

CELL_W, CELL_H = 0.85, 0.5


def cells(ax, x0, y, texts, colours):
    # 18 pt: mathtext draws the subscripts at 0.7 of it, still >= 16 px on the slide
    for k, (text, colour) in enumerate(zip(texts, colours)):
        box(ax, x0 + k * (CELL_W + 0.08), y, CELL_W, CELL_H, text, colour, 18)
    return [x0 + k * (CELL_W + 0.08) + CELL_W / 2 for k in range(len(texts))]


def row(ax, x0, y):
    """A dashed frame around a row of three cells: attention reads all of them."""
    ax.add_patch(FancyBboxPatch((x0 - 0.07, y - 0.07), 3 * CELL_W + 0.16 + 0.14, CELL_H + 0.14,
                                boxstyle="round,pad=0,rounding_size=0.08", facecolor="none",
                                edgecolor=INK, linewidth=1.4, linestyle="--"))


def kv_cache():
    """Step 3 of one decoder block: what state[2][i] holds, and what is projected."""
    fig, ax = canvas(12, 5.0)
    ax.plot([6.05, 6.05], [0.55, 4.95], color=INK, lw=1.0, linestyle=":")
    A, B, C = 3.55, 2.4, 1.3                                      # rows: cache, projection, K/V
    # ---- left: this module, as the book: the cache holds block inputs ----
    ax.text(0.1, 4.7, "本课模块（与书相同）：缓存块的输入", fontsize=16, weight="bold",
            va="center", color=INK)
    ax.text(0.1, A + CELL_H / 2, "缓存\nstate[2][i]", fontsize=14, va="center", color=INK,
            linespacing=1.3)
    xs = cells(ax, 1.45, A, ["$x_1$", "$x_2$", "$x_3$"], [OLD, OLD, NEW])
    # neutral box: of the 3 rows it projects, only 2 are recomputed (their outputs are red)
    box(ax, 1.45, B - 0.1, 2.55, 0.7, "$W_k$、$W_v$：投影全部 3 行\n（其中 2 行是重算）", PLAIN, 14)
    for x in xs:
        arrow(ax, (x, A), (x, B + 0.6))
    ax.text(0.1, C + CELL_H / 2, "键和值", fontsize=14, va="center", color=INK)
    # k1v1 and k2v2 were computed at earlier steps already: recomputing them is the waste.
    kv = cells(ax, 1.45, C, ["$k_1 v_1$", "$k_2 v_2$", "$k_3 v_3$"], [WASTE, WASTE, NEW])
    for x in kv:
        arrow(ax, (x, B - 0.1), (x, C + CELL_H))
    box(ax, 4.3, B, 1.6, 0.5, "$W_q$：1 行", NEW, 14)
    arrow(ax, (xs[2] + 0.2, A), (5.1, B + 0.5))
    row(ax, 1.45, C)
    arrow(ax, (5.1, B), (4.27, C + CELL_H / 2), rad=-0.3)
    ax.text(5.0, C - 0.05, "注意力：\n看全部 3 行", fontsize=14, ha="left", va="center",
            color=INK, linespacing=1.3)
    ax.text(0.1, 0.72, "编码器输出：每步都把 $S$ 个位置\n重新乘一遍 $W_k$、$W_v$", fontsize=14,
            va="center", color=INK, linespacing=1.4)
    ax.add_patch(Rectangle((0.02, 0.33), 3.5, 0.78, facecolor=WASTE, alpha=0.35, edgecolor="none"))
    # ---- right: production decoders cache the projected keys and values ----
    ax.text(6.3, 4.7, "常见的生产实现：缓存投影后的键和值", fontsize=16, weight="bold",
            va="center", color=INK)
    ax.text(6.3, A + CELL_H / 2, "缓存", fontsize=14, va="center", color=INK)
    kv = cells(ax, 7.35, A, ["$k_1 v_1$", "$k_2 v_2$", "$k_3 v_3$"], [OLD, OLD, NEW])
    x_new = cells(ax, 7.35, B, ["$x_3$"], [NEW])[0]
    box(ax, 8.5, B, 1.7, 0.5, "$W_k$、$W_v$：1 行", NEW, 14)
    arrow(ax, (x_new + CELL_W / 2, B + 0.25), (8.5, B + 0.25))
    arrow(ax, (kv[2], B + 0.5), (kv[2], A))
    box(ax, 10.45, B, 1.45, 0.5, "$W_q$：1 行", NEW, 14)
    arrow(ax, (x_new, B), (11.0, B), rad=0.32)                 # x3 feeds the query too
    row(ax, 7.35, A)
    arrow(ax, (11.15, B + 0.5), (10.17, A + CELL_H / 2), rad=0.3)
    # beside the curved arrow it labels (the query reads all 3 cached rows)
    ax.text(10.95, (A + B + 0.5) / 2 - 0.02, "注意力：\n看全部 3 行", fontsize=14, ha="right",
            va="center", color=INK, linespacing=1.3)
    ax.text(6.3, 0.72, "编码器输出的键和值：每句只算一次，\n之后每步直接取用", fontsize=14,
            va="center", color=INK, linespacing=1.4)
    ax.add_patch(Rectangle((6.22, 0.33), 3.75, 0.78, facecolor=ONCE, alpha=0.45, edgecolor="none"))
    # ---- key ----
    # red is used only in the left panel, so its key sits under it; grey and orange are used in
    # both panels, so their keys straddle the dividing line
    for x, colour, text in [(0.1, WASTE, "前几步算过、这一步又重算的"), (4.15, OLD, "前几步留下的"),
                            (6.3, NEW, "这一步新算的 1 行")]:
        ax.add_patch(Rectangle((x, 0.02), 0.26, 0.22, facecolor=colour, edgecolor=INK))
        ax.text(x + 0.38, 0.13, text, fontsize=13, va="center", color=INK)
    save(fig, "07_kv_cache.png")


if __name__ == "__main__":
    transformer()
    kv_cache()
