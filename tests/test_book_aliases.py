"""The book's small aliases and helpers that chapter 10's code calls."""

import matplotlib
import numpy as np
import pytest
import torch

import attention_utils as au


def test_tensor_aliases_are_torchs():
    assert au.ones is torch.ones and au.zeros is torch.zeros
    assert au.tensor is torch.tensor and au.arange is torch.arange
    assert au.eye is torch.eye and au.normal is torch.normal and au.rand is torch.rand
    assert au.sin is torch.sin and au.matmul is torch.matmul and au.concat is torch.cat
    assert au.plt is matplotlib.pyplot
    x = au.arange(6.0, requires_grad=True)
    assert au.reshape(x, (2, 3)).shape == (2, 3)
    assert au.reshape(x, 3, 2).shape == (3, 2)
    array = au.numpy(x * 2)                                     # needs grad: detached
    assert isinstance(array, np.ndarray) and array.tolist() == [0, 2, 4, 6, 8, 10]


def test_try_gpu_falls_back_to_the_cpu():
    if torch.cuda.device_count() == 0:
        assert au.try_gpu() == torch.device("cpu")
    assert au.try_gpu(torch.cuda.device_count()) == torch.device("cpu")


def test_set_figsize_and_set_axes():
    before = list(matplotlib.rcParams["figure.figsize"])
    try:
        au.set_figsize((4, 3))
        assert au.plt.figure().get_size_inches().tolist() == [4, 3]
    finally:
        matplotlib.rcParams["figure.figsize"] = before
    fig, ax = au.plt.subplots()
    ax.plot([1, 10], [1, 100])
    au.set_axes(ax, "x", "y", [1, 10], [1, 100], "log", "log", ["curve"])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "y")
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlim() == (1, 10) and ax.get_legend() is not None


def test_use_svg_display_switches_the_inline_format(monkeypatch):
    from matplotlib_inline import backend_inline

    formats = []
    monkeypatch.setattr(backend_inline, "set_matplotlib_formats",
                        lambda *f, **kw: formats.append(f))
    au.use_svg_display()
    assert formats == [("svg",)]


def test_animator_collects_points_like_the_book():
    animator = au.Animator(xlabel="epoch", ylabel="loss", legend=["train", "test"],
                           xlim=[1, 3], fmts=("-", "m--"), nrows=1, ncols=2,
                           figsize=(5, 2))
    for epoch in (1, 2, 3):
        animator.add(epoch, (1.0 / epoch, torch.tensor(2.0 / epoch)))
    animator.add(4, (None, 0.4))                                 # a None skips that curve
    ax = animator.axes[0]
    assert len(animator.axes) == 2 and animator.fig.get_size_inches().tolist() == [5, 2]
    assert [line.get_xdata().tolist() for line in ax.lines] == [[1, 2, 3], [1, 2, 3, 4]]
    assert ax.lines[1].get_ydata().tolist() == pytest.approx([2, 1, 2 / 3, 0.4])
    assert ax.get_xlabel() == "epoch" and ax.get_xlim() == (1, 3)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "test"]
    single = au.Animator()
    single.add(1, 5)                                             # one number, one curve
    assert single.axes[0].lines[0].get_ydata().tolist() == [5]


def test_timer_and_accumulator():
    timer = au.Timer()
    first = timer.stop()
    timer.start()
    second = timer.stop()
    assert timer.times == [first, second] and min(timer.times) >= 0
    assert timer.sum() == pytest.approx(first + second)
    assert timer.avg() == pytest.approx((first + second) / 2)
    assert timer.cumsum() == pytest.approx([first, first + second])
    acc = au.Accumulator(2)
    acc.add(1, torch.tensor(2.5))
    acc.add(2, 0.5)
    assert (acc[0], acc[1]) == (3.0, 3.0)
    acc.reset()
    assert acc.data == [0.0, 0.0]
