"""Make the diagram of deck 06 (Bahdanau attention).

    .venv/bin/python img/06_diagrams.py

writes 06_bottleneck.png next to this script. Two panels, the same GRU
encoder (T = 4 source tokens) in both:

  (a) the plain encoder-decoder of attention_utils (Seq2SeqEncoder +
      Seq2SeqDecoder): the encoder's last state h_4 is the decoder's initial
      hidden state s_0 (red arrow from c = h_4 to s_0) *and* the context c, which is concatenated to the
      embedded previous token y_{t'-1} at every decoding step;
  (b) Bahdanau attention (Seq2SeqAttentionDecoder): at step t' the previous
      decoder state s_{t'-1} is the query, every encoder state h_t is a key
      and a value (line width ~ an illustrative weight), the pooled context
      c_{t'} is concatenated to the embedded previous token y_{t'-1}, and the
      GRU turns them and s_{t'-1} into s_{t'}.

Drawn in the course figure style of attention_utils (fonts, sizes, CJK
fallback) and saved with au._png, so the PNG carries the figure report that
tests/test_lecture_rules.py reads. 1200 x 480 px: shown unshrunk on a slide.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import attention_utils as au  # noqa: E402  (sets the course style and CJK fonts)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

INK = "#111827"                                   # all text: near black
ENCODER, DECODER, CONTEXT, ATTENTION = "#bfdbfe", "#fed7aa", "#fca5a5", "#bbf7d0"
RED, GREEN, BROWN = "#b91c1c", "#15803d", "#9a3412"
XS = [1.2, 3.2, 5.2, 7.2]                         # encoder positions, T = 4
MATH = 17        # symbols (s_{t'-1}, h_t, ...): their subscripts stay >= 16 px on the slide
# Inside a subscript the prime is written t\prime (a glyph at subscript size), not t' (mathtext
# makes that a superscript of the subscript, about 12 px on the slide).


def box(ax, x, y, w, h, text, fill, weight="normal"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                boxstyle="round,pad=0,rounding_size=0.18",
                                facecolor=fill, edgecolor=INK, linewidth=1.4))
    size = MATH if "$" in text else None                # Chinese labels keep the course size
    ax.text(x, y, text, ha="center", va="center", color=INK, weight=weight, fontsize=size)


def arrow(ax, start, end, colour=INK, width=1.6, style="-|>", rad=0.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=16,
                                 linewidth=width, color=colour, shrinkA=0, shrinkB=0,
                                 connectionstyle=f"arc3,rad={rad}"))


def encoder(ax):
    """Source tokens x_1..x_4 and the encoder states h_1..h_4 along the bottom."""
    for t, x in enumerate(XS, start=1):
        ax.text(x, 0.35, f"$x_{t}$", ha="center", va="center", color=INK, fontsize=MATH)
        arrow(ax, (x, 0.75), (x, 1.15))
        box(ax, x, 1.65, 1.3, 0.9, f"$h_{t}$", ENCODER)
        if t > 1:
            arrow(ax, (XS[t - 2] + 0.65, 1.65), (x - 0.65, 1.65))
    ax.text(XS[-1] + 0.9, 1.65, "编码器", ha="left", va="center", color="#1e3a8a",
            weight="bold")


def plain(ax):
    encoder(ax)
    box(ax, 10.3, 3.6, 2.0, 0.9, "$c = h_4$", CONTEXT, "bold")
    arrow(ax, (XS[-1] + 0.4, 2.1), (9.5, 3.3), colour=RED, width=2.2)
    ds = [2.6, 5.4, 8.2]                          # decoder steps t' = 1, 2, 3
    box(ax, 0.0, 6.6, 1.3, 0.9, "$s_0$", DECODER)
    ax.text(0.15, 7.5, "$s_0 = h_4$", ha="center", va="center", color=RED, fontsize=MATH)
    ax.plot([9.3, 0.0], [3.6, 3.6], color=RED, linewidth=2.0)             # h_4 (via c) ...
    arrow(ax, (0.0, 3.6), (0.0, 6.15), colour=RED, width=2.0)            # ... is s_0
    ax.plot([ds[0] + 0.3, 10.3], [4.9, 4.9], color=RED, linewidth=2.0)   # the same c ...
    ax.plot([10.3, 10.3], [4.05, 4.9], color=RED, linewidth=2.0)
    for k, x in enumerate(ds, start=1):
        box(ax, x, 6.6, 1.3, 0.9, f"$s_{k}$", DECODER)
        left = 0.65 if k == 1 else ds[k - 2] + 0.65
        arrow(ax, (left, 6.6), (x - 0.65, 6.6))
        arrow(ax, (x, 7.05), (x, 7.55))
        ax.text(x, 7.9, f"$y_{k}$", ha="center", va="center", color=INK, fontsize=MATH)
        ax.text(x - 1.1, 5.5, f"$y_{k - 1}$", ha="center", va="center", color=INK, fontsize=MATH)
        arrow(ax, (x - 0.85, 5.75), (x - 0.4, 6.15))          # the previous token, embedded
        arrow(ax, (x + 0.3, 4.9), (x + 0.3, 6.15), colour=RED, width=2.0)  # ... at every step
    ax.text(11.4, 6.6, "解码器", ha="center", va="center", color=BROWN, weight="bold")
    ax.set_title("(a) 没有注意力：每一步都拿同一个 $c$", color=INK)


def bahdanau(ax):
    encoder(ax)
    weights = [0.05, 0.15, 0.7, 0.1]              # an illustrative alignment
    box(ax, 3.6, 4.0, 2.6, 0.9, "加性注意力", ATTENTION, "bold")
    for x, a in zip(XS, weights):
        arrow(ax, (x, 2.1), (3.6 + (x - 4.2) * 0.45, 3.55), colour=GREEN,
              width=1.5 + 8 * a, style="-")
    ax.text(9.3, 3.05, r"线宽示意 $\alpha(s_{t\prime-1}, h_t)$", ha="center", va="center",
            color=GREEN, fontsize=MATH + 1, weight="bold")
    box(ax, 0.4, 6.6, 2.1, 0.9, r"$s_{t\prime-1}$", DECODER)   # wide enough for the subscript
    arrow(ax, (0.5, 6.15), (2.6, 4.45), colour=BROWN, width=2.0)
    ax.text(0.7, 5.05, "查询", ha="center", va="center", color=BROWN, weight="bold")
    box(ax, 6.6, 4.0, 1.5, 0.9, r"$c_{t\prime}$", CONTEXT, "bold")
    arrow(ax, (4.9, 4.0), (5.85, 4.0))
    ax.text(9.5, 4.0, r"$y_{t\prime-1}$", ha="center", va="center", color=INK, fontsize=MATH)
    box(ax, 8.0, 6.6, 1.8, 0.9, "GRU", "#e5e7eb")
    arrow(ax, (1.45, 6.6), (7.1, 6.6))
    arrow(ax, (6.8, 4.45), (7.6, 6.15))                      # context
    arrow(ax, (9.3, 4.3), (8.5, 6.15))                       # previous token, embedded
    box(ax, 10.9, 6.6, 1.5, 0.9, r"$s_{t\prime}$", DECODER)
    arrow(ax, (8.9, 6.6), (10.15, 6.6))
    arrow(ax, (10.9, 7.05), (10.9, 7.55))
    ax.text(10.9, 7.9, r"$y_{t\prime}$", ha="center", va="center", color=INK, fontsize=MATH)
    # Only the first step starts from the encoder: s_{t'-1} = s_0 = h_4 when t' = 1.
    ax.text(-0.8, 7.55, "$t'=1$ 时 $s_0 = h_4$", ha="left", va="center", color=RED, fontsize=MATH)
    ax.set_title("(b) Bahdanau 注意力：每一步重新汇聚编码器的全部状态", color=INK)


def bottleneck():
    fig, axes = plt.subplots(1, 2, figsize=(12.0, 4.8), layout="none")
    fig.subplots_adjust(left=0.005, right=0.995, bottom=0.01, top=0.9, wspace=0.04)
    plain(axes[0])
    bahdanau(axes[1])
    for ax in axes:
        ax.set_xlim(-0.9, 12.6)
        ax.set_ylim(-0.1, 8.3)
        ax.set_aspect("equal")
        ax.axis("off")
    (HERE / "06_bottleneck.png").write_bytes(au._png(fig, tight=False))
    plt.close(fig)


if __name__ == "__main__":
    bottleneck()
