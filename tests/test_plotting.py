"""show_heatmaps, plot and show_source."""

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

import attention_utils as au
import book_reference as book
from unit_support import ours_and_book


class OtherDeviceTensor(torch.Tensor):
    """Stands in for a CUDA tensor on a CPU-only machine.

    Like a CUDA tensor, it refuses ``.numpy()``; ``.cpu()`` gives plain CPU
    data. A function that forgets to move its input to the CPU fails here the
    way it would on a GPU.
    """

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. "
                        "Use Tensor.cpu() to copy the tensor to host memory first.")

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).clone()


def images(fig):
    return [ax.images[0] for ax in fig.axes if ax.images]


def grid(rows=2, cols=3, L=4, S=5):
    return torch.softmax(torch.randn(rows, cols, L, S) * 3, dim=-1)


@ours_and_book()
def test_show_heatmaps_returns_the_figure(impl):
    fig = impl.show_heatmaps(grid(), xlabel="Keys", ylabel="Queries")
    assert isinstance(fig, Figure)                              # the book returns None


@ours_and_book()
def test_show_heatmaps_uses_one_colour_scale(impl):
    matrices = grid()
    matrices[0, 0] *= 0.1                                       # panels on different ranges
    matrices[1, 2] += 1
    impl.show_heatmaps(matrices, xlabel="Keys", ylabel="Queries")
    fig = matplotlib.pyplot.gcf()
    panels = images(fig)
    assert len(panels) == 6
    expected = (0.0, matrices.max().item())                     # weights start at 0
    for image in panels:
        assert image.get_clim() == pytest.approx(expected)
    colorbars = [ax for ax in fig.axes if not ax.images]
    assert len(colorbars) == 1                                  # one scale, one colorbar


# Not a defect of the book: d2l 0.17.6's show_heatmaps draws d2l.numpy(matrix),
# which detaches (we ran its own function on such a tensor). Both must pass.
@pytest.mark.parametrize("impl", [au, book], ids=["ours", "book"])
def test_show_heatmaps_accepts_a_tensor_that_needs_grad(impl):
    attention = au.DotProductAttention(0)
    X = torch.randn(1, 3, 4, requires_grad=True)
    attention(X, X, X, torch.tensor([2]))
    assert attention.attention_weights.requires_grad
    weights = attention.attention_weights.reshape(1, 1, 3, 3)
    impl.show_heatmaps(weights, xlabel="Keys", ylabel="Queries")
    assert matplotlib.pyplot.gcf().axes[0].images[0].get_array().shape == (3, 3)


@ours_and_book(raises=TypeError)
def test_show_heatmaps_accepts_bfloat16_non_contiguous(impl):
    matrices = grid(1, 2, 3, 4).to(torch.bfloat16).transpose(-1, -2)   # (1, 2, 4, 3)
    assert not matrices.is_contiguous()
    impl.show_heatmaps(matrices, xlabel="Keys", ylabel="Queries")
    panels = images(matplotlib.pyplot.gcf())
    assert [p.get_array().shape for p in panels] == [(4, 3), (4, 3)]
    assert panels[1].get_array()[0, 1] == pytest.approx(matrices[0, 1, 0, 1].item())


@ours_and_book(raises=TypeError)
def test_show_heatmaps_moves_another_devices_tensor_to_the_cpu(impl):
    matrices = grid(1, 2).as_subclass(OtherDeviceTensor)
    with pytest.raises(TypeError):
        matrices[0, 0].numpy()                                  # the stand-in works
    impl.show_heatmaps(matrices, xlabel="Keys", ylabel="Queries")
    assert len(images(matplotlib.pyplot.gcf())) == 2


def test_show_heatmaps_layout_labels_and_titles():
    fig = au.show_heatmaps(grid(2, 3), xlabel="Keys", ylabel="Queries",
                           titles=["a", "b", "c"], figsize=(6, 3), cmap="Blues")
    axes = [ax for ax in fig.axes if ax.images]
    assert tuple(fig.get_size_inches()) == pytest.approx((6, 3))   # the whole figure
    for k, ax in enumerate(axes):
        row, col = divmod(k, 3)
        assert ax.get_xlabel() == ("Keys" if row == 1 else "")
        assert ax.get_ylabel() == ("Queries" if col == 0 else "")
        assert ax.get_title() == "abc"[col]
        assert ax.images[0].get_cmap().name == "Blues"


def test_show_heatmaps_single_matrix_and_arrays():
    fig = au.show_heatmaps(torch.eye(3), xlabel="Keys", ylabel="Queries")
    assert len(images(fig)) == 1
    fig = au.show_heatmaps(torch.eye(3).numpy()[None, None], "Keys", "Queries")
    assert images(fig)[0].get_clim() == (0.0, 1.0)


@pytest.mark.parametrize("call, received", [
    (lambda: au.show_heatmaps(torch.ones(2, 3, 4), "k", "q"), r"\(2, 3, 4\)"),
    (lambda: au.show_heatmaps(torch.ones(1, 2, 3, 4), "k", "q", titles=["a"]), "got 1"),
])
def test_show_heatmaps_bad_input(call, received):
    with pytest.raises(ValueError, match=received) as error:
        call()
    assert "expected" in str(error.value)


def test_plot_draws_every_curve_and_returns_the_figure():
    x = torch.arange(0, 3, 0.5)
    y = torch.stack([x, x ** 2]).requires_grad_()                # needs grad: fine
    fig = au.plot(x, y, xlabel="x", ylabel="f(x)", legend=["x", "x^2"],
                  xlim=(0, 3), yscale="log")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.lines) == 2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["x", "x^2"]
    assert ax.get_xlim() == (0, 3) and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "x" and ax.get_ylabel() == "f(x)"
    assert list(ax.lines[1].get_ydata()) == pytest.approx((x ** 2).tolist())


def test_plot_accepts_lists_and_given_axes():
    fig = au.plot([0, 1, 2], [3, 4, 5])
    assert len(fig.axes[0].lines) == 1
    fig2, ax = matplotlib.pyplot.subplots()
    assert au.plot([[0, 1], [0, 1, 2]], [[1, 2], [3, 4, 5]], axes=ax) is fig2
    assert len(ax.lines) == 2


def test_plot_without_x_uses_indices_as_the_book():
    fig = au.plot([torch.tensor([3.0, 1.0, 2.0]), [5, 6, 7]], legend=["a", "b"])
    lines = fig.axes[0].lines
    assert [line.get_xdata().tolist() for line in lines] == [[0, 1, 2], [0, 1, 2]]
    assert lines[0].get_ydata().tolist() == [3, 1, 2]


def test_plot_bad_input():
    with pytest.raises(ValueError, match="got 2 x and 3 curves"):
        au.plot([torch.ones(3)] * 2, [torch.ones(3)] * 3)


def test_show_source_renders_the_module_code():
    code = au.show_source(au.masked_softmax)
    text = code.data
    assert text.startswith("def masked_softmax(X, valid_lens=None):")
    assert "Softmax over the last axis" not in text            # docstring dropped
    assert "weights = F.softmax(scores, dim=-1)" in text
    assert "Softmax over the last axis" in au.show_source(au.masked_softmax,
                                                          docstring=True).data
    method = au.show_source(au.DotProductAttention.forward).data
    assert method.startswith("def forward(self")               # dedented
    assert "Stores ``attention_weights``" not in method
    assert "class DotProductAttention" in au.show_source(au.DotProductAttention).data


def test_show_source_excerpt_keeps_the_idea_and_drops_the_bookkeeping():
    init = au.PositionalEncoding.__init__
    lines = au.show_source(init, start="position", stop="P[:, :, 1::2]").data.splitlines()
    assert lines[0].startswith("position = torch.arange(max_len")   # dedented
    assert lines[-1].startswith("P[:, :, 1::2] = torch.cos(")
    assert not any("register_buffer" in line or "Dropout" in line for line in lines)
    assert au.show_source(init, stop="P = torch.zeros").data.splitlines()[0].startswith("def ")
    with pytest.raises(ValueError, match="beginning with 'Q = '.*found none"):
        au.show_source(init, start="Q = ")


# --------------------------------------------------------------------------
# The book's figsize, colour range, masked cells, per-panel scales
# --------------------------------------------------------------------------

def test_show_heatmaps_figsize_is_the_whole_figure_as_in_the_book():
    for impl in (au, book):
        impl.show_heatmaps(grid(2, 4), "Keys", "Queries", figsize=(7, 3.5))
        size = matplotlib.pyplot.gcf().get_size_inches()
        assert tuple(size) == pytest.approx((7, 3.5))


def test_show_heatmaps_colour_range_starts_at_zero_only_for_weights():
    fig = au.show_heatmaps(torch.tensor([[0.2, 0.8], [0.5, 0.5]]), "k", "q")
    assert images(fig)[0].get_clim() == pytest.approx((0.0, 0.8))
    fig = au.show_heatmaps(torch.tensor([[-1.5, 2.0], [0.5, 0.0]]), "k", "q")
    assert images(fig)[0].get_clim() == pytest.approx((-1.5, 2.0))


def test_show_heatmaps_masked_cells_are_grey_and_outside_the_range():
    weights = torch.tensor([[[[0.3, 0.7, 9.0], [1.0, 0.0, -4.0]]]])  # (1, 1, 2, 3)
    mask = torch.tensor([True, True, False])                   # broadcast over L
    before = weights.clone()
    fig = au.show_heatmaps(weights, "Keys", "Queries", mask=mask)
    torch.testing.assert_close(weights, before)                # input untouched
    image = images(fig)[0]
    assert image.get_clim() == pytest.approx((0.0, 1.0))       # 9 and -4 ignored
    shown = image.get_array()
    assert shown.mask.tolist() == [[False, False, True], [False, False, True]]
    grey = matplotlib.colors.to_rgba("lightgrey")
    cmap = image.get_cmap()
    assert cmap(shown)[0, 2] == pytest.approx(grey)            # masked: grey
    assert cmap(image.norm(shown))[1, 1] != pytest.approx(grey)  # weight 0: not grey
    assert cmap.name == "Reds"
    assert matplotlib.colormaps["Reds"].get_bad()[3] == 0      # global map untouched


def test_show_heatmaps_fully_masked_panel_still_draws():
    fig = au.show_heatmaps(torch.rand(3, 3), "k", "q",
                           mask=torch.zeros(3, 3, dtype=torch.bool))
    assert images(fig)[0].get_array().mask.all()


def test_show_heatmaps_own_scale_per_panel():
    matrices = grid(1, 3)
    matrices[0, 0] *= 0.01
    fig = au.show_heatmaps(matrices, "Keys", "Queries", share_scale=False)
    panels = images(fig)
    for j, image in enumerate(panels):
        assert image.get_clim() == pytest.approx((0.0, matrices[0, j].max().item()))
    assert len([ax for ax in fig.axes if not ax.images]) == 3   # a colour bar each
    shared = au.show_heatmaps(matrices, "Keys", "Queries")
    assert len({image.get_clim() for image in images(shared)}) == 1


def test_figure_report_counts_sub_and_superscripts_at_their_drawn_size():
    """A log axis's exponents and a label's subscript are smaller than their text: the report
    measures them at the size mathtext draws them, which the course style sets."""
    import matplotlib._mathtext as mathtext
    import matplotlib.pyplot as plt
    assert mathtext.SHRINK_FACTOR == au.SCRIPT_SCALE == 0.9
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1e-4, 1])
    ax.set_yscale("log")                                       # ticks $\\mathdefault{10^{-4}}$
    assert au._figure_report(fig)["min_text_pt"] == pytest.approx(13 * 0.9)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2])
    ax.set_title(r"$k_1$ 与 \$5 元", fontsize=20)            # a subscript; an escaped dollar is text
    ax.tick_params(labelsize=30)
    ax.set_xlabel("x", fontsize=30)
    ax.set_ylabel("y", fontsize=30)
    assert au._figure_report(fig)["min_text_pt"] == pytest.approx(18)
    plt.close("all")


def test_show_heatmaps_fixed_scale_and_labelled_colour_bars():
    signed = torch.tensor([[-0.5, 0.9], [0.2, 0.0]])
    fig = au.show_heatmaps(signed, "k", "q", vmin=-1, vmax=1, colorbar_label="cos")
    assert images(fig)[0].get_clim() == pytest.approx((-1.0, 1.0))
    bars = [ax for ax in fig.axes if not ax.images]
    assert [bar.get_ylabel() for bar in bars] == ["cos"]                 # English: beside the bar
    assert "色标从 -1 到 1" in au._figure_alt(fig)
    per_panel = au.show_heatmaps(grid(1, 2), "k", "q", share_scale=False, colorbar_label="w")
    assert [ax.get_ylabel() for ax in per_panel.axes if not ax.images] == ["w", "w"]
    assert all(ax.get_ylabel() == "" for ax in au.show_heatmaps(signed, "k", "q").axes if not ax.images)
    assert au.show_heatmaps(signed, "keys", "queries").axes[0].yaxis.label.get_rotation() == 90
    with pytest.raises(ValueError, match="expected vmin < vmax, got vmin=1 and vmax=0"):
        au.show_heatmaps(signed, "k", "q", vmin=1, vmax=0)
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("upright", [None, True])
def test_show_heatmaps_writes_chinese_labels_level(upright):
    """Chinese labels are level by default (reviews 01_e, 04_g: read sideways)."""
    level = au.show_heatmaps(torch.rand(3, 3), "键", "查询", colorbar_label="权重",
                             upright_labels=upright)
    bar = [ax for ax in level.axes if not ax.images][0]
    assert (bar.get_ylabel(), bar.get_title(loc="left")) == ("", "权重")  # above the bar, level
    assert level.axes[0].yaxis.label.get_rotation() == 0 and level.axes[0].get_ylabel() == "查询"
    rotated = au.show_heatmaps(torch.rand(3, 3), "键", "查询", colorbar_label="权重",
                               upright_labels=False)
    assert rotated.axes[0].yaxis.label.get_rotation() == 90
    assert [ax.get_ylabel() for ax in rotated.axes if not ax.images] == ["权重"]
    matplotlib.pyplot.close("all")


def test_show_heatmaps_square_root_scale_and_colour_bar_size():
    """gamma, the colour-bar size and no colour bar are options, so no deck swaps or
    removes the module's bar or norm."""
    weights = torch.tensor([[0.01, 0.25], [0.04, 1.0]])
    fig = au.show_heatmaps(weights, "键", "查询", gamma=0.5, colorbar_label="权重（平方根色标）")
    norm = images(fig)[0].norm
    assert isinstance(norm, matplotlib.colors.PowerNorm) and norm.gamma == 0.5
    assert norm(0.25) == pytest.approx(0.5)                     # a quarter of the top: halfway in colour
    assert "色标从 0 到 1，按平方根拉伸" in au._figure_alt(fig)
    assert type(images(au.show_heatmaps(weights, "k", "q"))[0].norm) is matplotlib.colors.Normalize
    assert "拉伸" not in au._figure_alt(au.show_heatmaps(weights, "键", "查询"))

    def bar_height(**options):
        fig = au.show_heatmaps(weights, "键", "查询", figsize=(6, 3), **options)
        fig.canvas.draw()
        panel, bar = fig.axes[0], fig.axes[-1]
        return bar.get_position().height / panel.get_position().height, bar.get_position()

    (short, thin), (long, wide) = bar_height(), bar_height(colorbar_shrink=0.9, colorbar_aspect=10)
    assert short == pytest.approx(0.6, abs=0.02) and long == pytest.approx(0.9, abs=0.02)
    assert wide.width / wide.height > thin.width / thin.height  # aspect 10 is a wider bar than 20
    for share_scale in (True, False):                       # no bar at all, panels keep their images
        bare = au.show_heatmaps(grid(1, 2), "k", "q", share_scale=share_scale, colorbar=False)
        assert len(bare.axes) == 2 and all(ax.images for ax in bare.axes)
    assert len(au.show_heatmaps(grid(1, 2), "k", "q", share_scale=False).axes) == 4
    for options, received in [(dict(gamma=2), "got 2"), (dict(gamma=0), "got 0"),
                              (dict(colorbar_shrink=1.5), "got 1.5"),
                              (dict(colorbar_aspect=0), "got 0")]:
        with pytest.raises(ValueError, match=f"expected .*{received}"):
            au.show_heatmaps(weights, "k", "q", **options)
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("mask, received", [
    (torch.ones(2, 2), "dtype torch.float32"),
    (torch.ones(3, 2, dtype=torch.bool), r"got \(3, 2\)"),
])
def test_show_heatmaps_bad_mask(mask, received):
    with pytest.raises(ValueError, match=received) as error:
        au.show_heatmaps(torch.rand(1, 1, 2, 4), "k", "q", mask=mask)
    assert "expected" in str(error.value)


# --------------------------------------------------------------------------
# Chinese text in figures
# --------------------------------------------------------------------------

CJK_FONTS = ["Noto Sans CJK SC", "PingFang SC", "Heiti SC", "Hiragino Sans GB",
             "Microsoft YaHei", "SimHei"]


def test_font_fallback_list_covers_linux_macos_and_windows():
    families = matplotlib.rcParams["font.sans-serif"]
    assert families[:len(CJK_FONTS)] == CJK_FONTS
    assert families[-1] == "DejaVu Sans"                        # always present
    assert matplotlib.rcParams["axes.unicode_minus"] is False
    assert not any("/" in f or "\\" in f for f in families)     # names, no paths


def test_chinese_title_renders_without_missing_glyphs():
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    if not installed & set(CJK_FONTS):
        pytest.skip("no CJK font installed (Debian: fonts-noto-cjk)")
    import warnings

    fig = au.show_heatmaps(torch.rand(2, 2), xlabel="键", ylabel="查询",
                           titles=["注意力权重"])
    fig.axes[0].set_xticks([0, 1], ["我", "你"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                          # "Glyph ... missing"
        fig.canvas.draw()


# --------------------------------------------------------------------------
# Jupyter shows each figure once
# --------------------------------------------------------------------------

def test_figures_show_once_in_an_executed_notebook(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    import pathlib

    root = pathlib.Path(au.__file__).parent
    cells = [
        f"%matplotlib inline\nimport sys; sys.path.insert(0, {str(root)!r})\n"
        "import torch\nimport attention_utils as au\nw = torch.rand(2, 2, 3, 3)",
        "au.show_heatmaps(w, 'k', 'q')",                        # ends the cell
        "fig = au.show_heatmaps(w, 'k', 'q')",                  # assigned
        "au.plot([0, 1], [1, 2])",
        "fig = au.plot([0, 1], [1, 2])",
        "fig",                                                  # closed: shown again
        "train_iter, src_vocab, tgt_vocab = au.load_data_synthetic(16, 11, num_examples=16)\n"
        "net = au.EncoderDecoder(au.Seq2SeqEncoder(len(src_vocab), 4, 8, 1),\n"
        "                        au.Seq2SeqDecoder(len(tgt_vocab), 4, 8, 1))\n"
        "au.train_seq2seq(net, train_iter, 0.01, 20, tgt_vocab, 'cpu')",   # the book's cell
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    pngs = [sum("image/png" in out.get("data", {}) for out in cell.outputs)
            for cell in nb.cells]
    assert pngs == [0, 1, 1, 1, 1, 1, 1]
    # Every figure, shown by the module or by the inline backend's flush,
    # carries its text alternative where the offline slides read it.
    alts = [out.metadata["image/png"]["alt"] for cell in nb.cells for out in cell.outputs
            if "image/png" in out.get("data", {})]
    assert len(alts) == 6 and all(alts)
    assert alts[0].startswith("热力图，2 行 × 2 列共 4 幅，每幅 3 个q × 3 个k")
    assert alts[2].startswith("曲线图：横轴（")
    assert alts[5].startswith("曲线图：横轴 epoch")                    # the Animator, a plain Figure
    # The book's training cell: the Animator's final plot once, the speed
    # line, and a one-line echo of the returned loss history.
    outputs = nb.cells[-1].outputs
    assert outputs[0].output_type == "stream" and outputs[0].text.startswith("loss ")
    assert outputs[1].data["text/plain"].startswith("per-token loss of 20 epochs: ")


# --------------------------------------------------------------------------
# Text alternatives and masked cells that differ by pattern
# --------------------------------------------------------------------------

def png_text(png):
    from PIL import Image
    import io

    return Image.open(io.BytesIO(png)).text


def test_heatmap_alt_says_shape_axes_and_where_the_weights_lie():
    weights = torch.softmax(6 * torch.eye(10), dim=-1)         # (10, 10), peaked on the diagonal
    fig = au.show_heatmaps(weights, "键", "查询")
    png, alt = au._png_and_alt(fig)
    assert alt.startswith("热力图：10 个查询 × 10 个键，权重集中在对角线上。色标从 0 到 ")
    assert png_text(png)["Description"] == alt                 # the PNG carries it too
    assert {"au:min_text_pt", "au:legend_overlaps", "au:axes_limits"} <= set(png_text(png))


def test_heatmap_alt_names_token_labels_and_masked_cells():
    weights = torch.tensor([[0.1, 0.9, 0.0], [0.2, 0.8, 0.0], [0.3, 0.7, 0.0]])
    mask = torch.tensor([True, True, False])
    fig = au.show_heatmaps(weights, "源词元", "生成的词元", titles=["对齐"], mask=mask)
    fig.axes[0].set_xticks(range(3), ["march", "fifth", "<eos>"])   # a deck labels tokens afterwards
    alt = au._figure_alt(fig)
    assert alt.startswith("热力图「对齐」：3 个生成的词元 × 3 个源词元，每一行的最大权重在列 1（fifth）")
    assert "灰底斜线格是被掩蔽的位置" in alt


def test_heatmap_alt_for_a_grid_and_for_values_that_are_not_weights():
    fig = au.show_heatmaps(grid(2, 3), "Keys", "Queries", titles=["a", "b", "c"])
    alt = au._figure_alt(fig)
    assert alt.startswith("热力图，2 行 × 3 列共 6 幅，每幅 4 个Queries × 5 个Keys；第 1 行第 1 幅「a」：")
    assert alt.count("；第 2 行第 ") == 3 and len(alt) <= au.MAX_ALT_CHARS
    fig = au.show_heatmaps(torch.tensor([[-1.0, 2.0], [0.5, 0.0]]), "k", "q")
    assert "最大数值 2 在行 0、列 1（从 0 数起）" in au._figure_alt(fig)


def test_alt_given_by_the_deck_wins():
    fig = au.show_heatmaps(torch.eye(3), "k", "q", alt="单位矩阵：每个查询只看自己")
    assert au._figure_alt(fig) == "单位矩阵：每个查询只看自己"
    fig = au.plot([0, 1], [1, 2], alt="一条直线")
    assert au._png_and_alt(fig)[1] == "一条直线"


def test_plot_alt_from_titles_labels_ranges_and_legend():
    x = torch.arange(0, 5, 0.5)
    fig = au.plot(x, [x, 2 * x], "$x$", "y", legend=["真实函数", "预测"], xlim=[0, 5], ylim=[0, 10])
    fig.axes[0].set_title("宽度 $\\sigma$ = 1")
    fig.suptitle("核回归")
    assert au._figure_alt(fig) == ("核回归。曲线图「宽度 σ = 1」：横轴 x（0 到 5），纵轴 y（0 到 10）；"
                                   "图例：真实函数、预测。")
    bars, ax = matplotlib.pyplot.subplots()
    ax.bar(range(3), [1, 2, 3])
    ax.plot([0, 2], [1, 3], "o")
    assert au._figure_alt(bars).startswith("散点、柱状图：横轴（")


def test_masked_cells_are_hatched_not_only_grey():
    mask = au.valid_lens_to_mask(torch.tensor([2, 3]), 4, 5)   # (2, 1, 5)
    weights = au.masked_softmax(torch.rand(2, 4, 5), torch.tensor([2, 3]))
    fig = au.show_heatmaps(weights[None], "键", "查询", mask=mask[None])
    for ax, masked_cells in zip([ax for ax in fig.axes if ax.images], (4 * 3, 4 * 2)):
        hatched = [c for c in ax.collections if c.get_hatch() == "///"]
        assert len(hatched) == 1 and len(hatched[0].get_paths()) == masked_cells
    unmasked = au.show_heatmaps(weights[0], "键", "查询")
    assert not unmasked.axes[0].collections


def test_diagram_alt_lists_its_labels_and_a_broken_figure_still_renders():
    fig, ax = matplotlib.pyplot.subplots()
    ax.add_patch(matplotlib.patches.Rectangle((0, 0), 1, 1))
    for x, word in enumerate(["查询", "键", "值"]):
        ax.text(x, 0, word)
    ax.set_axis_off()
    assert au._figure_alt(fig) == "示意图：查询、键、值。"
    broken = au.show_heatmaps(torch.eye(3), "k", "q")
    broken.axes[0].set_visible(False)                          # no panel left to describe
    png, alt = au._png_and_alt(broken)
    assert png.startswith(b"\x89PNG") and alt == "一幅图（没能自动生成文字说明）。"


def test_describe_gives_a_figure_its_text_alternative():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert au.describe(fig, "曲线图：从 1 降到 0") is fig
    assert au._figure_alt(fig) == "曲线图：从 1 降到 0"
    with pytest.raises(ValueError, match="non-empty str"):
        au.describe(fig, " ")


def test_text_alternatives_say_math_as_symbols():
    assert au._plain(r"$\mathbf{q}_1$ 与 $\alpha_i$，$\sqrt{d}$，$\mathbf{q}^\top\mathbf{k}$") == "q_1 与 α_i，√d，qᵀk"


@pytest.mark.parametrize("magic", ["", "%matplotlib inline"])
def test_plain_pyplot_figures_carry_the_report_whatever_starts_the_inline_backend(tmp_path, magic):
    """The inline backend installs its own PNG renderer when it starts (at the first
    figure, or on %matplotlib inline, even after the import); figures must still
    carry the figure report and a text alternative."""
    import base64
    import io
    import pathlib

    from PIL import Image

    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root = pathlib.Path(au.__file__).parent
    cells = [f"import sys; sys.path.insert(0, {str(root)!r})\nimport attention_utils as au\n"
             "import matplotlib.pyplot as plt",
             magic,
             "fig, ax = plt.subplots()\nax.plot([1, 2])"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    [out] = [o for o in nb.cells[2].outputs if "image/png" in o.get("data", {})]
    assert "au:min_text_pt" in Image.open(io.BytesIO(base64.b64decode(out.data["image/png"]))).text
    assert out.metadata["image/png"]["alt"].startswith("曲线图")


def test_heatmap_text_alternative_names_the_colour_scales():
    w = torch.softmax(torch.randn(1, 2, 3, 3), dim=-1)
    assert "色标从 0 到" in au._figure_alt(au.show_heatmaps(w, "键", "查询"))
    assert "每幅各用自己的色标" in au._figure_alt(au.show_heatmaps(w, "键", "查询", share_scale=False))


def test_heatmap_alt_says_every_row_only_when_every_row_agrees():
    w = torch.zeros(5, 4)
    w[:, 1] = 1.0
    w[4] = torch.tensor([0.0, 0.0, 0.0, 1.0])                    # the last row looks elsewhere
    alt = au._figure_alt(au.show_heatmaps(w, "键", "查询"))
    assert "5 行中有 4 行的最大数值在列 1" in alt or "5 行中有 4 行的最大权重在列 1" in alt, alt
    assert "每一行" not in alt
