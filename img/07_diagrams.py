"""Make the diagrams of deck 07 (Transformer).

    .venv/bin/python img/07_diagrams.py

writes next to this script:

* 07_transformer.png -- the encoder block and the decoder block, stacked
  num_layers times, with the three uses of attention numbered and coloured:
  (1) encoder self-attention, (2) decoder masked (causal) self-attention,
  (3) encoder-decoder attention, and where each one's queries, keys and
  values come from;
* 07_kv_cache.png -- decoding at prediction time: at step t a decoder block
  gets only the newest token, appends it to its cache state[2][i] and lets
  that one query attend to every cached position.

Labels are Simplified Chinese (the deck's language); the font list covers
Linux (fonts-noto-cjk), macOS and Windows.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
plt.rcParams["font.sans-serif"] = ["Noto Sans CJK SC", "PingFang SC", "Heiti SC",
                                   "Microsoft YaHei", "SimHei", "DejaVu Sans"]
plt.rcParams["axes.unicode_minus"] = False

ENC_SELF, DEC_SELF, CROSS = "#9ecae1", "#fdae6b", "#a1d99b"   # the three attentions
NORM, FFN, EMBED = "#f2f0f7", "#eeeeee", "#ffffff"
INK, MEMORY = "#333333", "#238b45"


def box(ax, x, y, w, h, text, colour, fontsize=11, weight="normal", edge=INK,
        linestyle="-"):
    ax.add_patch(FancyBboxPatch((x, y), w, h,
                                boxstyle="round,pad=0.04,rounding_size=0.12",
                                facecolor=colour, edgecolor=edge, linewidth=1.3,
                                linestyle=linestyle))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center",
                fontsize=fontsize, weight=weight)


def arrow(ax, p0, p1, colour=INK, style="-|>", connectionstyle="arc3", lw=1.3):
    ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle=style, mutation_scale=13,
                                 linewidth=lw, color=colour,
                                 connectionstyle=connectionstyle))


def residual(ax, x, y0, y1, side=-1):
    """A skip connection from height y0 into the Add & Norm box at height y1."""
    xs = x + side * 0.32
    ax.plot([x, xs, xs], [y0, y0, y1], color="#777777", lw=1.2)
    arrow(ax, (xs, y1), (x, y1), colour="#777777")


def stack(ax, x, w, y, sublayers, label):
    """Draw one block: a list of (text, colour) sublayers, each + Add & Norm."""
    top = y
    for text, colour in sublayers:
        box(ax, x, top, w, 0.62, text, colour, 12, "bold")
        arrow(ax, (x + w / 2, top - 0.28), (x + w / 2, top - 0.02))
        residual(ax, x, top - 0.15, top + 0.98)
        box(ax, x, top + 0.8, w, 0.36, "加法和规范化（AddNorm）", NORM, 10)
        arrow(ax, (x + w / 2, top + 0.64), (x + w / 2, top + 0.78))
        top += 1.55
    return top


def transformer():
    fig, ax = plt.subplots(figsize=(12.4, 6.6))
    w = 3.6
    enc_x, dec_x = 1.0, 8.0
    # ---- encoder ----
    box(ax, enc_x - 0.55, 1.55, w + 1.0, 3.25, "", "#f7fbff", linestyle="--")
    top = stack(ax, enc_x, w, 1.85, [("① 多头自注意力", ENC_SELF),
                                     ("基于位置的前馈网络", FFN)], "enc")
    ax.text(enc_x - 0.75, 3.2, "× N\n(num_layers)", ha="right", va="center",
            fontsize=11, color="dimgray")
    ax.text(enc_x - 0.5, 4.95, "编码器", ha="left", fontsize=14, weight="bold")
    box(ax, enc_x, 0.55, w, 0.62, "嵌入 × √d  ＋  位置编码", EMBED, 11)
    arrow(ax, (enc_x + w / 2, 1.18), (enc_x + w / 2, 1.55))
    ax.text(enc_x + w / 2, 0.1, "源序列词元（填充到 num_steps）", ha="center",
            va="center", fontsize=11)
    arrow(ax, (enc_x + w / 2, 0.27), (enc_x + w / 2, 0.53))
    ax.text(enc_x + w / 2, 5.55, "编码器输出 enc_outputs", ha="center",
            va="center", fontsize=11, weight="bold", color=MEMORY)
    arrow(ax, (enc_x + w / 2, top - 0.37), (enc_x + w / 2, 5.38), colour=MEMORY)
    # ---- decoder ----
    box(ax, dec_x - 0.55, 1.55, w + 1.0, 4.8, "", "#fff5eb", linestyle="--")
    top = stack(ax, dec_x, w, 1.85, [("② 掩蔽多头自注意力", DEC_SELF),
                                     ("③ 编码器－解码器注意力", CROSS),
                                     ("基于位置的前馈网络", FFN)], "dec")
    ax.text(dec_x + w + 0.6, 3.9, "× N\n(num_layers)", ha="left", va="center",
            fontsize=11, color="dimgray")
    ax.text(dec_x - 0.5, 6.5, "解码器", ha="left", fontsize=14, weight="bold")
    box(ax, dec_x, 0.55, w, 0.62, "嵌入 × √d  ＋  位置编码", EMBED, 11)
    arrow(ax, (dec_x + w / 2, 1.18), (dec_x + w / 2, 1.55))
    ax.text(dec_x + w / 2, 0.1, "目标词元（右移一位，<bos> 开头）", ha="center",
            va="center", fontsize=11)
    arrow(ax, (dec_x + w / 2, 0.27), (dec_x + w / 2, 0.53))
    box(ax, dec_x, 7.0, w, 0.55, "全连接层 → 词表上的预测", EMBED, 11)
    arrow(ax, (dec_x + w / 2, 6.35), (dec_x + w / 2, 6.98))
    # encoder output -> keys and values of (3)
    arrow(ax, (enc_x + w / 2 + 1.3, 5.55), (dec_x - 0.02, 3.71), colour=MEMORY,
          connectionstyle="arc3,rad=-0.15", lw=2)
    ax.text(6.3, 5.25, "键 = 值", ha="center", fontsize=11, color=MEMORY,
            weight="bold")
    # ---- the three uses, explained ----
    notes = [(ENC_SELF, "① 查询、键、值：上一层编码器输出（遮填充）"),
             (DEC_SELF, "② 查询、键、值：上一层解码器输出（因果掩蔽）"),
             (CROSS, "③ 查询：解码器；键和值：编码器输出（遮填充）")]
    for k, (colour, text) in enumerate(notes):
        y = 7.45 - 0.48 * k
        ax.add_patch(Rectangle((-0.2, y - 0.15), 0.3, 0.3, facecolor=colour,
                               edgecolor=INK))
        ax.text(0.25, y, text, ha="left", va="center", fontsize=11.5)
    ax.set_xlim(-0.3, 13.0)
    ax.set_ylim(0.0, 7.9)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(HERE / "07_transformer.png", dpi=110, bbox_inches="tight",
                facecolor="white")
    plt.close(fig)


def kv_cache():
    """Three decoding steps of one decoder block, with its cache state[2][i]."""
    fig, ax = plt.subplots(figsize=(12.4, 4.2))
    tokens = ["<bos>", "$y_1$", "$y_2$"]
    cell = 0.75
    for t in range(3):
        x0 = 0.4 + t * 4.3
        ax.text(x0 + 1.6, 3.65, f"第 {t + 1} 步（t = {t}）", ha="center",
                fontsize=13, weight="bold")
        # the cache: t earlier positions (grey) + the new one (orange)
        for s in range(t + 1):
            new = s == t
            ax.add_patch(Rectangle((x0 + s * cell, 1.6), cell * 0.92, 0.8,
                                   facecolor=DEC_SELF if new else "#dddddd",
                                   edgecolor=INK))
            ax.text(x0 + s * cell + cell * 0.46, 2.0, tokens[s], ha="center",
                    va="center", fontsize=11)
        ax.text(x0, 1.35, f"state[2][i]：{t + 1} 个位置的块输入 = 键和值", ha="left",
                va="top", fontsize=10.5)
        # the one query
        box(ax, x0 + t * cell, 2.85, cell * 0.92, 0.5, "查询", DEC_SELF, 10)
        for s in range(t + 1):
            arrow(ax, (x0 + t * cell + cell * 0.46, 2.85),
                  (x0 + s * cell + cell * 0.46, 2.42), colour="#b35806",
                  connectionstyle="arc3,rad=0.25" if s != t else "arc3")
        ax.text(x0, 0.7, f"输入：1 个新词元\n缓存前：{t} 个位置" if t else
                "输入：1 个新词元\n缓存前：None", ha="left", va="top", fontsize=10.5, linespacing=1.6,
                color="dimgray")
    ax.set_xlim(0, 13.2)
    ax.set_ylim(-0.3, 4.1)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(HERE / "07_kv_cache.png", dpi=110, bbox_inches="tight",
                facecolor="white")
    plt.close(fig)


if __name__ == "__main__":
    transformer()
    kv_cache()
