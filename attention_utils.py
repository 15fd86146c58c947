"""Attention mechanisms for the course, mirroring d2l-zh 2.0's API.

Every deck imports this module (``import attention_utils as au``) and teaches
from it; the decks never redefine what is here. Names, signatures, parameter
names and shapes follow the book (``d2l==0.17.6``), so book code runs against
this module and a book module's ``state_dict`` loads into ours. Where the book
is wrong, this module is right, and ``tests/`` proves it:

* nothing writes into a tensor it was given;
* a query with ``valid_len == 0`` gets all-zero weights (zero output), never
  NaN and never uniform weights over padding;
* float16 and bfloat16 work, and masked weights are exactly 0;
* bad input raises a ValueError that names what was expected and what came.

Shape legend (as in ``F.scaled_dot_product_attention``):

    B   batch size
    L   number of queries (target length)
    S   number of keys = number of values (source length)
    E   query and key size (dot-product attention needs them equal)
    Ev  value size
    H   number of heads
    h   hidden units (``num_hiddens``); each head gets d = h / H of them
    n   sequence length where queries, keys and values are one sequence

Mask convention, everywhere: a boolean mask is True where attention is
*allowed*, as in ``F.scaled_dot_product_attention``. (``nn.MultiheadAttention``'s
``key_padding_mask`` means the opposite: True = ignore.) Every mask is built
from ``valid_lens`` by one helper, ``valid_lens_to_mask``.
"""

import ast
import inspect
import itertools
import math
import textwrap

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from matplotlib._pylab_helpers import Gcf
from matplotlib.figure import Figure
from torch import nn

__all__ = [
    # masking
    "valid_lens_to_mask",
    "sequence_mask",
    "masked_softmax",
    "causal_valid_lens",
    # scoring functions and attention layers
    "AdditiveAttention",
    "DotProductAttention",
    "transpose_qkv",
    "transpose_output",
    "MultiHeadAttention",
    "PositionalEncoding",
    # Nadaraya-Watson kernel regression
    "nw_target",
    "nw_data",
    "nw_kernel_regression",
    "leave_one_out",
    "NWKernelRegression",
    # plotting and slides
    "show_heatmaps",
    "plot",
    "show_source",
    # interactive figures (live, offline and unrun)
    "Slider",
    "interactive",
]


# --------------------------------------------------------------------------
# Input checks: bad input fails here, with a message, not deep in a reshape.
# --------------------------------------------------------------------------

def _check_rank(X, rank, name, shape_text):
    if not isinstance(X, torch.Tensor):
        raise ValueError(f"expected {name} to be a torch.Tensor of shape "
                         f"{shape_text}, got {type(X).__name__}")
    if X.dim() != rank:
        raise ValueError(f"expected {name} of shape {shape_text} ({rank}-D), "
                         f"got shape {tuple(X.shape)} ({X.dim()}-D)")


def _check_qkv(queries, keys, values, query_size=None, key_size=None,
               value_size=None):
    """Check (B, L, ·), (B, S, ·), (B, S, ·) and, where given, the last sizes."""
    _check_rank(queries, 3, "queries", "(B, L, E)")
    _check_rank(keys, 3, "keys", "(B, S, E)")
    _check_rank(values, 3, "values", "(B, S, Ev)")
    if not queries.shape[0] == keys.shape[0] == values.shape[0]:
        raise ValueError(
            "expected queries, keys and values with the same batch size B, got "
            f"{queries.shape[0]}, {keys.shape[0]} and {values.shape[0]}")
    if keys.shape[1] != values.shape[1]:
        raise ValueError(
            "expected one value per key (keys (B, S, E), values (B, S, Ev)), "
            f"got keys {tuple(keys.shape)} and values {tuple(values.shape)}")
    for X, size, name in ((queries, query_size, "query_size"),
                          (keys, key_size, "key_size"),
                          (values, value_size, "value_size")):
        if size is not None and X.shape[-1] != size:
            raise ValueError(f"expected last dimension {name}={size}, "
                             f"got shape {tuple(X.shape)}")


# --------------------------------------------------------------------------
# Masking
# --------------------------------------------------------------------------

def _check_valid_lens(valid_lens, num_queries, batch_size=None):
    """valid_lens as a tensor of shape (B,) or (B, L), all >= 0, or ValueError."""
    if not isinstance(valid_lens, torch.Tensor):
        valid_lens = torch.as_tensor(valid_lens)
    B = "B" if batch_size is None else batch_size
    if not (valid_lens.dim() == 1 or (valid_lens.dim() == 2
                                      and valid_lens.shape[1] == num_queries)) \
            or (batch_size is not None and valid_lens.shape[0] != batch_size):
        raise ValueError(
            f"expected valid_lens of shape ({B},) or ({B}, {num_queries}), "
            f"got shape {tuple(valid_lens.shape)}")
    if valid_lens.numel() and (valid_lens < 0).any():
        raise ValueError("expected valid_lens >= 0, got "
                         f"{valid_lens.min().item()} in {valid_lens.tolist()}")
    return valid_lens


def valid_lens_to_mask(valid_lens, num_queries, num_keys):
    """Boolean mask, True where a query may attend to a key.

    Args:
        valid_lens: (B,) -- one length per sequence, shared by its L queries --
            or (B, L) -- one length per query. Key j is kept when
            ``j < valid_len``; lengths above S keep every key.
        num_queries: L.  num_keys: S.

    Returns:
        (B, 1, S) for 1-D ``valid_lens`` and (B, L, S) for 2-D. Both broadcast
        against scores (B, L, S); the 1-D case stays small on purpose.
    """
    valid_lens = _check_valid_lens(valid_lens, num_queries)
    lens = valid_lens.reshape(valid_lens.shape[0], -1, 1)      # (B, 1 or L, 1)
    positions = torch.arange(num_keys, device=valid_lens.device)  # (S,)
    return positions < lens                                    # (B, 1 or L, S)


def sequence_mask(X, valid_len, value=0):
    """Return a copy of X with the entries past each row's length set to value.

    Args:
        X: (N, S, ...) -- N sequences of S steps (trailing dims allowed).
        valid_len: (N,) -- the number of leading steps to keep per row.
        value: what masked entries become.

    Returns:
        A new tensor like X. Unlike the book's version, X itself is untouched.
    """
    if not isinstance(X, torch.Tensor) or X.dim() < 2:
        shape = tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__
        raise ValueError(f"expected X of shape (N, S, ...), got {shape}")
    if torch.as_tensor(valid_len).shape != (X.shape[0],):
        raise ValueError(f"expected valid_len of shape ({X.shape[0]},), got "
                         f"{tuple(torch.as_tensor(valid_len).shape)}")
    keep = valid_lens_to_mask(valid_len, 1, X.shape[1])[:, 0]  # (N, S)
    keep = keep.reshape(keep.shape + (1,) * (X.dim() - 2))     # (N, S, 1, ...)
    return X.masked_fill(~keep.to(X.device), value)


def masked_softmax(X, valid_lens=None):
    """Softmax over the last axis that gives masked keys exactly zero weight.

    Args:
        X: (B, L, S) scores.
        valid_lens: None (no mask), (B,) or (B, L); see ``valid_lens_to_mask``.

    Returns:
        (B, L, S) weights. Each row sums to 1 over its valid keys and is 0
        elsewhere; a row with ``valid_len == 0`` is all zeros.
    """
    _check_rank(X, 3, "X", "(B, L, S)")
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    B, L, S = X.shape
    valid_lens = _check_valid_lens(valid_lens, L, batch_size=B)
    keep = valid_lens_to_mask(valid_lens, L, S).to(X.device)   # (B, 1 or L, S)
    # The book fills with -1e6: that overflows float16 and leaks weight when
    # real scores lie below it. -inf fits every dtype and exp(-inf) is exactly
    # 0, so masked keys drop out of the sum. torch.where returns a new tensor:
    # the caller's X is left alone.
    scores = torch.where(keep, X, -math.inf)                   # (B, L, S)
    weights = F.softmax(scores, dim=-1)                        # (B, L, S)
    # A row with no valid key is 0/0 = NaN here, and the book would give it
    # uniform weights over padding; it must attend to nothing, so zero it.
    # Checking the lengths first skips this extra pass in the common case.
    if (valid_lens == 0).any():
        weights = torch.where(keep, weights, 0.0)              # (B, L, S)
    return weights


def causal_valid_lens(batch_size, num_steps, device=None):
    """(B, T) lengths 1, 2, ..., T per row: query t sees keys 0..t only.

    This is how the book's Transformer decoder masks the future during
    training; it equals a lower-triangular ``torch.tril`` mask.
    """
    steps = torch.arange(1, num_steps + 1, device=device)     # (T,)
    return steps.repeat(batch_size, 1)                         # (B, T)


# --------------------------------------------------------------------------
# Scoring functions
# --------------------------------------------------------------------------

class AdditiveAttention(nn.Module):
    """a(q, k) = w_v^T tanh(W_q q + W_k k): queries and keys may differ in size.

    Parameters ``W_q`` (query_size -> h), ``W_k`` (key_size -> h) and
    ``w_v`` (h -> 1), all without bias, as in the book.
    """

    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        """queries (B, L, query_size), keys (B, S, key_size), values (B, S, Ev),
        valid_lens None, (B,) or (B, L) -> (B, L, Ev).
        Stores ``attention_weights`` (B, L, S), taken before dropout."""
        _check_qkv(queries, keys, values, self.W_q.in_features,
                   self.W_k.in_features)
        queries, keys = self.W_q(queries), self.W_k(keys)     # (B, L, h), (B, S, h)
        # Every query meets every key: broadcasting makes a (B, L, S, h)
        # tensor, the memory cost of additive attention. tanh_ works in place
        # on that fresh sum, so only one such tensor is alive at a time.
        features = (queries.unsqueeze(2) + keys.unsqueeze(1)).tanh_()  # (B, L, S, h)
        scores = features @ self.w_v.weight[0]                 # (B, L, S, h) @ (h,) -> (B, L, S)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values   # (B, L, S) @ (B, S, Ev) -> (B, L, Ev)


class DotProductAttention(nn.Module):
    """a(q, k) = q^T k / sqrt(E): no parameters, but q and k must have size E."""

    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        """queries (B, L, E), keys (B, S, E), values (B, S, Ev),
        valid_lens None, (B,) or (B, L) -> (B, L, Ev).
        Stores ``attention_weights`` (B, L, S), taken before dropout."""
        _check_qkv(queries, keys, values)
        if queries.shape[-1] != keys.shape[-1]:
            raise ValueError(
                "expected queries and keys of the same size E, got queries "
                f"{tuple(queries.shape)} and keys {tuple(keys.shape)}; "
                "use AdditiveAttention for different sizes")
        E = queries.shape[-1]
        # With unit-variance entries q.k has variance E; dividing by sqrt(E)
        # brings it back to 1 so softmax does not saturate. Scaling the
        # queries (L*E numbers) is cheaper than scaling the scores (L*S).
        scores = (queries / math.sqrt(E)) @ keys.transpose(1, 2)  # (B, L, E) @ (B, E, S) -> (B, L, S)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return self.dropout(self.attention_weights) @ values   # (B, L, S) @ (B, S, Ev) -> (B, L, Ev)


# --------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------

def transpose_qkv(X, num_heads):
    """(B, n, H*d) -> (B*H, n, d): head i takes columns [i*d, (i+1)*d).

    Folding the heads into the batch lets one batched matmul run every head.
    Row b*H + i of the result is head i of sequence b.
    """
    _check_rank(X, 3, "X", "(B, n, H*d)")
    if num_heads <= 0 or X.shape[2] % num_heads:
        raise ValueError(f"expected the last dimension of X {tuple(X.shape)} "
                         f"to be divisible by num_heads={num_heads} > 0")
    B, n, _ = X.shape
    X = X.reshape(B, n, num_heads, -1)                         # (B, n, H, d)
    X = X.permute(0, 2, 1, 3)                                  # (B, H, n, d)
    return X.reshape(B * num_heads, n, -1)                     # (B*H, n, d)


def transpose_output(X, num_heads):
    """(B*H, n, d) -> (B, n, H*d): undoes ``transpose_qkv``."""
    _check_rank(X, 3, "X", "(B*H, n, d)")
    if num_heads <= 0 or X.shape[0] % num_heads:
        raise ValueError(f"expected the first dimension of X {tuple(X.shape)} "
                         f"to be divisible by num_heads={num_heads} > 0")
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])       # (B, H, n, d)
    X = X.permute(0, 2, 1, 3)                                  # (B, n, H, d)
    return X.reshape(X.shape[0], X.shape[1], -1)               # (B, n, H*d)


class MultiHeadAttention(nn.Module):
    """H scaled dot-product heads, each on its own d = h / H wide projection.

    Parameters ``W_q``, ``W_k``, ``W_v`` (input size -> h) and ``W_o``
    (h -> h). ``self.attention.attention_weights`` is (B*H, L, S): row
    b*H + i is head i of sequence b.
    """

    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 num_heads, dropout, bias=False, **kwargs):
        super().__init__(**kwargs)
        if num_heads <= 0 or num_hiddens % num_heads:
            raise ValueError(f"expected num_heads > 0 dividing num_hiddens, got "
                             f"num_hiddens={num_hiddens}, num_heads={num_heads}")
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens=None):
        """queries (B, L, query_size), keys (B, S, key_size),
        values (B, S, value_size), valid_lens None, (B,) or (B, L)
        -> (B, L, h)."""
        _check_qkv(queries, keys, values, self.W_q.in_features,
                   self.W_k.in_features, self.W_v.in_features)
        if valid_lens is not None:
            valid_lens = _check_valid_lens(valid_lens, queries.shape[1],
                                           batch_size=queries.shape[0])
            # Every head of sequence b sees the same keys; rows b*H .. b*H+H-1.
            valid_lens = valid_lens.repeat_interleave(self.num_heads, dim=0)  # (B*H,) or (B*H, L)
        queries = transpose_qkv(self.W_q(queries), self.num_heads)  # (B*H, L, d)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)        # (B*H, S, d)
        values = transpose_qkv(self.W_v(values), self.num_heads)    # (B*H, S, d)
        output = self.attention(queries, keys, values, valid_lens)  # (B*H, L, d)
        return self.W_o(transpose_output(output, self.num_heads))  # (B, L, h)


# --------------------------------------------------------------------------
# Positional encoding
# --------------------------------------------------------------------------

class PositionalEncoding(nn.Module):
    """Adds P[pos, 2i] = sin(pos / 10000^(2i/h)), P[pos, 2i+1] = cos(...).

    ``P`` is (1, max_len, h). It is a non-persistent buffer: it follows the
    module to a device but is not in the ``state_dict``, as in the book.
    """

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float32)[:, None]      # (max_len, 1)
        frequency = torch.pow(10000, torch.arange(
            0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)          # (ceil(h/2),)
        angles = position / frequency                          # (max_len, ceil(h/2))
        P = torch.zeros(1, max_len, num_hiddens)
        P[:, :, 0::2] = torch.sin(angles)
        P[:, :, 1::2] = torch.cos(angles[:, :num_hiddens // 2])  # odd h: one fewer cos column
        self.register_buffer("P", P, persistent=False)

    def forward(self, X):
        """X (B, n, h) with n <= max_len -> (B, n, h)."""
        _check_rank(X, 3, "X", f"(B, n, {self.P.shape[2]})")
        if X.shape[2] != self.P.shape[2] or X.shape[1] > self.P.shape[1]:
            raise ValueError(
                f"expected X of shape (B, n <= {self.P.shape[1]}, "
                f"{self.P.shape[2]}), got {tuple(X.shape)}")
        X = X + self.P[:, :X.shape[1], :].to(X.dtype)          # (B, n, h) + (1, n, h)
        return self.dropout(X)


# --------------------------------------------------------------------------
# Nadaraya-Watson kernel regression (deck 02)
# --------------------------------------------------------------------------

def nw_target(x):
    """The book's true function f(x) = 2 sin(x) + x^0.8."""
    return 2 * torch.sin(x) + x ** 0.8


def nw_data(n_train=50, noise=0.5, generator=None):
    """The book's toy data set.

    Returns:
        x_train (n_train,) sorted uniform on [0, 5); y_train (n_train,) =
        f(x_train) + N(0, noise^2); x_test (50,) = arange(0, 5, 0.1);
        y_truth (50,) = f(x_test).
    """
    x_train, _ = torch.sort(torch.rand(n_train, generator=generator) * 5)
    y_train = nw_target(x_train) + noise * torch.randn(n_train, generator=generator)
    x_test = torch.arange(0, 5, 0.1)
    return x_train, y_train, x_test, nw_target(x_test)


def nw_kernel_regression(queries, keys, values, width=1.0):
    """Non-parametric Nadaraya-Watson regression with a Gaussian kernel.

    f(x) = sum_i softmax_i(-((x - x_i) / width)^2 / 2) y_i: attention pooling
    whose score is minus the squared distance.

    Args:
        queries (n,), keys (m,), values (m,); width > 0, the kernel's width.

    Returns:
        predictions (n,) and attention_weights (n, m).
    """
    if width <= 0:
        raise ValueError(f"expected width > 0, got {width}")
    for X, name in ((queries, "queries"), (keys, "keys"), (values, "values")):
        _check_rank(X, 1, name, "(n,)" if name == "queries" else "(m,)")
    if keys.shape != values.shape:
        raise ValueError(f"expected keys and values of one shape (m,), got "
                         f"{tuple(keys.shape)} and {tuple(values.shape)}")
    scores = -((queries[:, None] - keys[None, :]) / width) ** 2 / 2   # (n, 1) - (1, m) -> (n, m)
    attention_weights = F.softmax(scores, dim=1)               # (n, m)
    return attention_weights @ values, attention_weights       # (n, m) @ (m,) -> (n,)


def leave_one_out(x):
    """(n,) -> (n, n-1): row i holds every entry of x except x[i].

    Training the parametric model with a point as its own key would let it
    cheat: a very narrow kernel would just copy y_i back.
    """
    _check_rank(x, 1, "x", "(n,)")
    n = x.shape[0]
    others = ~torch.eye(n, dtype=torch.bool, device=x.device)  # (n, n)
    return x.expand(n, n)[others].reshape(n, n - 1)            # (n, n-1)


class NWKernelRegression(nn.Module):
    """Parametric Nadaraya-Watson: a(x, x_i) = -((x - x_i) w)^2 / 2, w learned."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = nn.Parameter(torch.rand((1,)))

    def forward(self, queries, keys, values):
        """queries (n,), keys (n, m), values (n, m) -> (n,): query i pools its
        own row of keys and values. Stores ``attention_weights`` (n, m)."""
        _check_rank(queries, 1, "queries", "(n,)")
        _check_rank(keys, 2, "keys", "(n, m)")
        if keys.shape != values.shape or keys.shape[0] != queries.shape[0]:
            raise ValueError(
                f"expected queries (n,), keys (n, m), values (n, m), got "
                f"{tuple(queries.shape)}, {tuple(keys.shape)}, {tuple(values.shape)}")
        scores = -((queries[:, None] - keys) * self.w) ** 2 / 2   # (n, 1) - (n, m) -> (n, m)
        self.attention_weights = F.softmax(scores, dim=1)      # (n, m)
        return (self.attention_weights * values).sum(dim=1)    # (n, m) -> (n,)


# --------------------------------------------------------------------------
# Plotting
# --------------------------------------------------------------------------

def _use_cjk_fonts():
    """Let figures show Chinese on Linux, macOS and Windows.

    matplotlib's generic 'sans-serif' family picks the first installed font
    of this list, so the CJK fonts (which also carry Latin glyphs) come first
    and DejaVu Sans, matplotlib's own font, last: a machine without any of
    them still draws Latin text instead of warning. Fonts are named, never
    located by path, so the list works on every system.
    """
    cjk = ["Noto Sans CJK SC",                                 # Linux: fonts-noto-cjk
           "PingFang SC", "Heiti SC", "Hiragino Sans GB",      # macOS
           "Microsoft YaHei", "SimHei"]                         # Windows
    others = [f for f in plt.rcParams["font.sans-serif"]
              if f not in cjk and f != "DejaVu Sans"]
    plt.rcParams["font.sans-serif"] = cjk + others + ["DejaVu Sans"]
    # CJK fonts often lack U+2212 (the typographic minus): use '-' instead.
    plt.rcParams["axes.unicode_minus"] = False


_use_cjk_fonts()


class _ShownOnceFigure(Figure):
    """A Figure that Jupyter shows once, whether a cell ends with it or not.

    The inline backend shows, when a cell ends, every figure the cell left
    open in pyplot. A Figure that is also the cell's value would show a second
    time. So displaying this one shows its PNG and closes it in pyplot, which
    takes it out of that end-of-cell flush. Draw everything before displaying.
    """

    def _ipython_display_(self):
        from IPython.core.pylabtools import print_figure
        from IPython.display import display

        display({"image/png": print_figure(self, "png", bbox_inches="tight")},
                raw=True)
        if any(manager.canvas.figure is self for manager in Gcf.get_all_fig_managers()):
            plt.close(self)                                    # shown: not again


def _check_heatmap_mask(mask, matrices):
    mask = torch.as_tensor(mask).detach().cpu()
    if mask.dtype != torch.bool:
        raise ValueError(f"expected a boolean mask (True = attention allowed), "
                         f"got dtype {mask.dtype}")
    try:
        return mask.expand_as(matrices)
    except RuntimeError:
        raise ValueError(f"expected a mask broadcastable to matrices "
                         f"{tuple(matrices.shape)}, got {tuple(mask.shape)}") from None


def _colour_range(values):
    """(vmin, vmax) of the shown values; weights (all >= 0) start at 0."""
    if values.numel() == 0:
        return 0.0, 1.0
    vmin, vmax = values.min().item(), values.max().item()
    return min(vmin, 0.0), vmax


def show_heatmaps(matrices, xlabel, ylabel, titles=None, figsize=(2.5, 2.5),
                  cmap="Reds", *, mask=None, share_scale=True):
    """Draw a grid of attention matrices, as ``d2l.show_heatmaps`` does.

    Args:
        matrices: (rows, cols, L, S), or (L, S) for a single panel. A tensor
            that needs grad, or lives on another device, is fine.
        xlabel: label under the bottom row (usually 'Keys' / '键').
        ylabel: label left of the first column (usually 'Queries' / '查询').
        titles: one title per column, or None.
        figsize: size of the whole figure in inches, as in the book.
        cmap: a matplotlib colormap or its name.
        mask: optional boolean tensor broadcastable to ``matrices``, True where
            attention is allowed (the module's convention). Cells where it is
            False are drawn light grey, so a masked key never looks like a
            small weight, and they do not count for the colour range.
        share_scale: True (default): one colour scale and one colour bar for
            all panels, so equal colours mean equal values. False: each panel
            gets its own scale and colour bar, so panels with small values
            still show their pattern.

    The colour scale starts at 0 when every shown value is >= 0 (weights)
    and at the smallest value otherwise.

    Returns:
        The matplotlib Figure. In Jupyter it shows exactly once, whether the
        call ends the cell or its result is assigned.
    """
    matrices = torch.as_tensor(matrices).detach().cpu().float()
    keep = (torch.ones(matrices.shape, dtype=torch.bool) if mask is None
            else _check_heatmap_mask(mask, matrices))          # True = shown
    if matrices.dim() == 2:
        matrices, keep = matrices[None, None], keep[None, None]  # (1, 1, L, S)
    _check_rank(matrices, 4, "matrices", "(rows, cols, L, S) or (L, S)")
    num_rows, num_cols = matrices.shape[:2]
    if titles is not None and len(titles) != num_cols:
        raise ValueError(f"expected {num_cols} titles (one per column), "
                         f"got {len(titles)}")
    cmap = matplotlib.colormaps.get_cmap(cmap).with_extremes(bad="lightgrey")  # masked cells
    fig, axes = plt.subplots(num_rows, num_cols, figsize=figsize, sharex=True,
                             sharey=True, squeeze=False,
                             FigureClass=_ShownOnceFigure)
    # The book's colour bar described only the last panel; a shared scale
    # makes equal colours mean equal weights across panels.
    vmin, vmax = _colour_range(matrices[keep])
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            if not share_scale:
                vmin, vmax = _colour_range(matrices[i, j][keep[i, j]])
            shown = np.ma.masked_array(matrices[i, j].numpy(),
                                       mask=~keep[i, j].numpy())
            image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax)
            if not share_scale:
                fig.colorbar(image, ax=ax, shrink=0.6)
            if i == num_rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                ax.set_title(titles[j])
    if share_scale:
        fig.colorbar(image, ax=axes, shrink=0.6)
    return fig


def plot(X, Y, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"),
         figsize=(3.5, 2.5), axes=None):
    """Plot curves, as ``d2l.plot`` does, and return the Figure.

    Args:
        X: x values (k,), shared by every curve, or a list with one per curve.
        Y: one curve (k,), a list of curves, or a 2-D tensor of curves (rows).
        axes: draw into these matplotlib Axes instead of a new figure.

    Returns:
        The Figure; a new one shows exactly once in Jupyter, whether the call
        ends the cell or its result is assigned.
    """
    def as_list(Z):
        if isinstance(Z, torch.Tensor):
            Z = Z.detach().cpu()
            return [Z] if Z.dim() == 1 else list(Z)
        if isinstance(Z, (list, tuple)) and Z and not hasattr(Z[0], "__len__"):
            return [Z]                                         # one curve of numbers
        return list(Z) if isinstance(Z, (list, tuple)) else [Z]

    Y = as_list(Y)
    X = as_list(X)
    if len(X) == 1:
        X = X * len(Y)
    if len(X) != len(Y):
        raise ValueError(f"expected one x per curve, got {len(X)} x and "
                         f"{len(Y)} curves")
    if axes is None:
        fig, axes = plt.subplots(figsize=figsize, FigureClass=_ShownOnceFigure)
    for i, (x, y) in enumerate(zip(X, Y)):
        x = torch.as_tensor(x).detach().cpu()
        y = torch.as_tensor(y).detach().cpu()
        axes.plot(x.numpy(), y.numpy(), fmts[i % len(fmts)])
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    if xlim is not None:
        axes.set_xlim(xlim)
    if ylim is not None:
        axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid(True)
    return axes.figure


def show_source(obj, docstring=False):
    """Syntax-highlighted source of a function, class or method, for a slide.

    Decks put implementations on slides with this instead of copying them, so
    a slide always shows the code that actually runs. Docstrings are left out
    by default to keep the code short enough for one slide.
    """
    from IPython.display import Code  # only the decks need IPython

    source = textwrap.dedent(inspect.getsource(obj))
    lines = source.splitlines()
    if not docstring:
        drop = set()
        for node in ast.walk(ast.parse(source)):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                drop.update(range(body[0].lineno - 1, body[0].end_lineno))
        lines = [line for i, line in enumerate(lines) if i not in drop]
    return Code("\n".join(lines), language="python")


# --------------------------------------------------------------------------
# Interactive figures
# --------------------------------------------------------------------------
# One helper serves every deck's controls in all three places a deck is shown:
#   * live (a kernel): ipywidgets sliders swap precomputed frames, so a drag is
#     instant and needs no plotting code on the slide;
#   * offline HTML (no kernel): the same frames, swapped by a few lines of
#     JavaScript in the cell's stored text/html output, with no CDN;
#   * before anyone runs the deck (an untrusted notebook): JupyterLab strips
#     the scripts, and what is left is the figure at its default setting.
# The frames are PNG data URIs inside text/html, which strict nbval compares,
# so `make test` sanitizes them (tests/nbval_sanitize.cfg): nbval checks the
# control labels and the markup, not PNG bytes.

class Slider:
    """One control of an interactive figure: a fixed list of values to pick from.

    Args:
        values: the values, in slider order (a list, tuple or range).
        value: the value shown first (default: the first one).
        description: the label in front of the slider (Chinese on slides).
        labels: optional text for each value (default: ``f"{v:g}"`` for
            numbers, ``str(v)`` otherwise).
    """

    def __init__(self, values, value=None, description=None, labels=None):
        self.values = list(values)
        if not self.values:
            raise ValueError("expected at least one slider value, got none")
        value = self.values[0] if value is None else value
        if value not in self.values:
            raise ValueError(f"expected value to be one of {self.values}, got {value!r}")
        self.index = self.values.index(value)
        self.description = description
        if labels is None:
            labels = [f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool)
                      else str(v) for v in self.values]
        if len(labels) != len(self.values):
            raise ValueError(f"expected {len(self.values)} labels (one per value), got {len(labels)}")
        self.labels = [str(label) for label in labels]


class _InteractiveFigure:
    """What `interactive` returns; Jupyter displays it through its MIME bundle."""

    def __init__(self, names, sliders, frames):
        self.names, self.sliders, self.frames = names, sliders, frames
        self._widget = None

    def _frame_index(self, indices):                  # row-major over the sliders
        flat = 0
        for slider, i in zip(self.sliders, indices):
            flat = flat * len(slider.values) + i
        return flat

    def _default(self):
        return self._frame_index([s.index for s in self.sliders])

    def _live_widget(self):
        import ipywidgets as widgets

        # Natural size, as the figure shows unrun: in the VBox (a flex column)
        # the image would otherwise stretch to the width of the cell.
        image = widgets.Image(value=self.frames[self._default()], format="png",
                              layout=widgets.Layout(width="auto", height="auto", max_width="100%",
                                                    align_self="flex-start"))
        controls = [
            widgets.SelectionSlider(
                options=list(zip(s.labels, range(len(s.values)))), value=s.index,
                description=s.description or name, continuous_update=True,
                style={"description_width": "initial"}, layout=widgets.Layout(width="460px"))
            for name, s in zip(self.names, self.sliders)]

        def show(change):
            image.value = self.frames[self._frame_index([c.value for c in controls])]

        for control in controls:
            control.observe(show, names="value")
        return widgets.VBox([*controls, image])

    def _html(self):
        import base64
        import html
        import json

        uris = ["data:image/png;base64," + base64.b64encode(f).decode("ascii") for f in self.frames]
        captions = " · ".join(
            f"{html.escape(s.description or n)} = {html.escape(s.labels[s.index])}"
            for n, s in zip(self.names, self.sliders))
        spec = {"controls": [{"label": s.description or n, "labels": s.labels, "index": s.index}
                             for n, s in zip(self.names, self.sliders)],
                "frames": uris}
        # '</' would end the JSON script early; JSON allows the escaped form.
        data = json.dumps(spec, ensure_ascii=False).replace("</", "<\\/")
        return (f'<div class="au-interactive">\n'
                f'<div class="au-controls">{captions}</div>\n'
                f'<img class="au-frame" alt="{captions}" src="{uris[self._default()]}">\n'
                f'<script type="application/json" class="au-frames">{data}</script>\n'
                f'<script>{_INTERACTIVE_JS}</script>\n</div>')

    def _repr_mimebundle_(self, include=None, exclude=None):
        settings = ", ".join(f"{s.description or n} = {s.labels[s.index]}"
                             for n, s in zip(self.names, self.sliders))
        bundle = {"text/plain": f"交互图（{settings}）：运行本单元后拖动滑块查看变化",
                  "text/html": self._html()}
        try:
            if self._widget is None:
                self._widget = self._live_widget()
            bundle["application/vnd.jupyter.widget-view+json"] = {
                "version_major": 2, "version_minor": 0, "model_id": self._widget.model_id}
        except ImportError:  # no ipywidgets: the HTML controls still work
            pass
        return bundle


# Offline controls: build one range input per slider and swap the frame.
# Plain ES5, no libraries; reveal.js keeps the arrow keys while an input has
# focus, so the input gives focus back when the pointer is released.
_INTERACTIVE_JS = """(function () {
  var root = document.currentScript && document.currentScript.parentNode;
  if (!root || root.getAttribute('data-ready')) return;
  root.setAttribute('data-ready', '1');
  var spec = JSON.parse(root.querySelector('script.au-frames').textContent);
  var img = root.querySelector('img.au-frame'), box = root.querySelector('.au-controls');
  var inputs = [];
  box.textContent = '';
  function show() {
    var flat = 0;
    spec.controls.forEach(function (c, k) {
      var i = +inputs[k].value;
      flat = flat * c.labels.length + i;
      inputs[k].nextSibling.textContent = ' ' + c.labels[i];
    });
    img.src = spec.frames[flat];
  }
  spec.controls.forEach(function (c) {
    var row = document.createElement('label'), input = document.createElement('input');
    row.className = 'au-control';
    row.appendChild(document.createTextNode(c.label + ' '));
    input.type = 'range'; input.min = 0; input.max = c.labels.length - 1; input.step = 1;
    input.value = c.index;
    input.addEventListener('input', show);
    input.addEventListener('pointerup', function () { input.blur(); });
    row.appendChild(input);
    row.appendChild(document.createElement('output'));
    box.appendChild(row);
    inputs.push(input);
  });
  show();
})();"""


def _png(fig):
    from IPython.core.pylabtools import print_figure  # the inline backend's own renderer

    return print_figure(fig, "png", bbox_inches="tight")


MAX_FRAMES = 64    # pictures per interactive figure; keeps an offline deck small


def interactive(draw, **controls):
    """A figure with sliders that works live, in the offline slides and unrun.

    Every combination of slider values is drawn once, up front; moving a
    slider then only swaps pictures, live (ipywidgets) and offline (a few
    lines of JavaScript in the stored HTML). End the cell with the call, or
    pass the result to ``display``.

    Args:
        draw: ``draw(**values)`` draws one setting and returns its Figure
            (or leaves it as the current figure). It must not call plt.show().
        **controls: one per keyword of ``draw``: a ``Slider``, or a list of
            values (the first is the default).

    Example::

        au.interactive(lambda valid_len: au.show_heatmaps(...),
                       valid_len=au.Slider(range(9), value=3, description="有效长度"))
    """
    if not controls:
        raise ValueError("expected at least one control (keyword=Slider or list), got none")
    if not callable(draw):
        raise ValueError(f"expected draw to be a function, got {type(draw).__name__}")
    names = list(controls)
    sliders = [c if isinstance(c, Slider) else Slider(c) for c in controls.values()]
    count = math.prod(len(s.values) for s in sliders)
    if count > MAX_FRAMES:
        raise ValueError(f"expected at most {MAX_FRAMES} slider combinations (each is a "
                         f"stored picture), got {count}; offer fewer values")
    frames = []
    for indices in itertools.product(*(range(len(s.values)) for s in sliders)):
        fig = draw(**{n: s.values[i] for n, s, i in zip(names, sliders, indices)})
        fig = plt.gcf() if fig is None else fig
        frames.append(_png(fig))
        plt.close(fig)                 # shown as a frame, never by the inline flush
    return _InteractiveFigure(names, sliders, frames)
