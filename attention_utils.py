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
import collections
import inspect
import itertools
import json
import math
import os
import random
import textwrap
import time

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
    # the book's small helpers and aliases
    "ones", "zeros", "tensor", "arange", "eye", "reshape", "normal", "rand",
    "sin", "matmul", "numpy", "concat", "try_gpu", "use_svg_display",
    "set_figsize", "set_axes", "plt", "Animator", "Timer", "Accumulator",
    # machine translation data
    "Vocab",
    "read_data_nmt",
    "preprocess_nmt",
    "tokenize_nmt",
    "truncate_pad",
    "build_array_nmt",
    "load_array",
    "load_data_nmt",
    "synthetic_translation_pairs",
    "load_data_synthetic",
    # encoder-decoder, training and prediction
    "Encoder",
    "Decoder",
    "AttentionDecoder",
    "EncoderDecoder",
    "Seq2SeqEncoder",
    "Seq2SeqDecoder",
    "Seq2SeqAttentionDecoder",
    "MaskedSoftmaxCELoss",
    "grad_clipping",
    "train_seq2seq",
    "predict_seq2seq",
    "bleu",
    # Transformer
    "PositionWiseFFN",
    "AddNorm",
    "EncoderBlock",
    "TransformerEncoder",
    "DecoderBlock",
    "TransformerDecoder",
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

    def forward(self, X, *, offset=0):
        """X (B, n, h) with offset + n <= max_len -> (B, n, h).

        ``offset``: the position of X's first step (a decoder that produces
        one token at a time passes how many it produced before)."""
        _check_rank(X, 3, "X", f"(B, n, {self.P.shape[2]})")
        if X.shape[2] != self.P.shape[2] or offset + X.shape[1] > self.P.shape[1]:
            raise ValueError(
                f"expected X of shape (B, n <= {self.P.shape[1] - offset}, "
                f"{self.P.shape[2]}) at offset {offset}, got {tuple(X.shape)}")
        X = X + self.P[:, offset:offset + X.shape[1], :].to(X.dtype)  # (B, n, h) + (1, n, h)
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
# The book's small helpers and aliases (so chapter code runs with au.)
# --------------------------------------------------------------------------

ones, zeros, tensor, arange, eye = torch.ones, torch.zeros, torch.tensor, torch.arange, torch.eye
normal, rand, sin, matmul, concat = torch.normal, torch.rand, torch.sin, torch.matmul, torch.cat


def reshape(x, *args, **kwargs):
    """The book's ``d2l.reshape(x, shape)``: ``x.reshape(shape)``."""
    return x.reshape(*args, **kwargs)


def numpy(x, *args, **kwargs):
    """The book's ``d2l.numpy(x)``: a NumPy array of x, detached, on the CPU."""
    return x.detach().cpu().numpy(*args, **kwargs)


def try_gpu(i=0):
    """``cuda:i`` if that GPU exists, else the CPU."""
    if torch.cuda.device_count() >= i + 1:
        return torch.device(f"cuda:{i}")
    return torch.device("cpu")


def use_svg_display():
    """As in the book, draw pyplot figures in Jupyter as SVG from now on.

    The module's own figures (show_heatmaps, plot, Animator) stay PNG either
    way: nbval compares SVG as text, so stored SVG plots would never re-run
    equal.
    """
    from matplotlib_inline import backend_inline

    backend_inline.set_matplotlib_formats("svg")


def set_figsize(figsize=(3.5, 2.5)):
    """Set the default size of new pyplot figures, in inches."""
    plt.rcParams["figure.figsize"] = figsize


def set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend):
    """Set an Axes' labels, limits, scales and legend, and turn the grid on."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    axes.set_xlim(xlim)
    axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid(True)


class Animator:
    """Curves that grow point by point, redrawn in place in Jupyter (the book's).

    ``add(x, y)`` appends one point per curve (y a number or a list) and
    redraws. In Jupyter each redraw replaces the last, and the inline backend
    shows the final figure once when the cell ends (after any text printed
    later); outside IPython nothing is displayed (the figure is in
    ``self.fig``).
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None,
                 ylim=None, xscale="linear", yscale="linear",
                 fmts=("-", "m--", "g-.", "r:"), nrows=1, ncols=1,
                 figsize=(3.5, 2.5)):
        # A plain Figure: it stays open, so the end-of-cell flush shows the
        # final state even when text printed after the last redraw cleared it.
        self.fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
        self.axes = list(axes.flat)
        self.config_axes = lambda: set_axes(self.axes[0], xlabel, ylabel, xlim,
                                            ylim, xscale, yscale, legend or [])
        self.X, self.Y, self.fmts = None, None, fmts

    def add(self, x, y):
        if not hasattr(y, "__len__"):
            y = [y]
        n = len(y)
        if not hasattr(x, "__len__"):
            x = [x] * n
        if not self.X:
            self.X = [[] for _ in range(n)]
        if not self.Y:
            self.Y = [[] for _ in range(n)]
        for i, (a, b) in enumerate(zip(x, y)):
            if a is not None and b is not None:
                self.X[i].append(float(a))
                self.Y[i].append(float(b))
        self.axes[0].cla()
        for xs, ys, fmt in zip(self.X, self.Y, self.fmts):
            self.axes[0].plot(xs, ys, fmt)
        self.config_axes()
        self._show()

    def _show(self):
        try:
            from IPython import get_ipython
            from IPython.display import clear_output, display
        except ImportError:
            return
        if get_ipython() is not None:                          # in a kernel, not a script
            display(self.fig)
            clear_output(wait=True)                            # the next frame replaces it


class Timer:
    """Wall-clock timer: ``start()``, ``stop()`` (returns and records the
    interval), ``avg()``, ``sum()``, ``cumsum()``."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        self.tik = time.perf_counter()

    def stop(self):
        self.times.append(time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self):
        return sum(self.times) / len(self.times)

    def sum(self):
        return sum(self.times)

    def cumsum(self):
        return list(itertools.accumulate(self.times))


class Accumulator:
    """n running sums: ``add(*values)``, ``reset()``, ``acc[i]``."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


# --------------------------------------------------------------------------
# Machine translation data (the book's fra-eng, read locally)
# --------------------------------------------------------------------------

FRA_ENG_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"


class Vocab:
    """Token <-> index table, as the book's: index 0 is '<unk>', then
    ``reserved_tokens``, then tokens seen at least ``min_freq`` times, most
    frequent first (ties in order of first appearance).

    ``vocab[token]`` or ``vocab[list of tokens]`` gives indices (unknown
    tokens map to ``vocab.unk``); ``vocab.to_tokens(indices)`` goes back.
    """

    def __init__(self, tokens=None, min_freq=0, reserved_tokens=None):
        tokens = [] if tokens is None else tokens
        if tokens and isinstance(tokens[0], (list, tuple)):
            tokens = [token for line in tokens for token in line]
        counter = collections.Counter(tokens)
        self._token_freqs = sorted(counter.items(), key=lambda item: item[1],
                                   reverse=True)
        self.idx_to_token = ["<unk>"]
        for token in (reserved_tokens or []):
            if token not in self.idx_to_token:    # the book would map it twice
                self.idx_to_token.append(token)
        self.token_to_idx = {token: i for i, token in enumerate(self.idx_to_token)}
        for token, freq in self._token_freqs:
            if freq < min_freq:
                break
            if token not in self.token_to_idx:
                self.token_to_idx[token] = len(self.idx_to_token)
                self.idx_to_token.append(token)

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, self.unk)
        return [self[token] for token in tokens]

    def to_tokens(self, indices):
        if isinstance(indices, torch.Tensor):
            indices = indices.tolist()
        if not isinstance(indices, (list, tuple)):
            return self.idx_to_token[indices]
        return [self.idx_to_token[i] for i in indices]

    @property
    def unk(self):
        return 0

    @property
    def token_freqs(self):
        return self._token_freqs


def _fra_eng_dir(data_dir):
    # d2l's download_extract unpacks fra-eng.zip into ../data, relative to the
    # notebook's working directory, so the book's reader finds it there.
    return os.path.join("..", "data", "fra-eng") if data_dir is None else data_dir


def read_data_nmt(data_dir=None):
    """The text of the book's English-French file ``fra-eng/fra.txt``.

    Reads ``<data_dir>/fra.txt``; by default ``../data/fra-eng/fra.txt``, where
    the book's ``d2l.download_extract('fra-eng')`` puts it. Never downloads:
    a missing file raises FileNotFoundError saying where to put it.
    """
    path = os.path.join(_fra_eng_dir(data_dir), "fra.txt")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"expected the fra-eng data set at {os.path.abspath(path)}, got no "
            f"such file. This module never downloads: fetch {FRA_ENG_URL} by "
            f"hand, unzip it so that fra.txt lies at that path (or pass "
            f"data_dir='<folder holding fra.txt>'), or train on "
            f"load_data_synthetic(), which needs no download")
    with open(path, encoding="utf-8") as f:
        return f.read()


def preprocess_nmt(text):
    """Lower-case, turn non-breaking spaces into spaces, and put a space
    before , . ! ? where none is, so punctuation becomes its own token."""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    return "".join(" " + char if i > 0 and char in ",.!?" and text[i - 1] != " "
                   else char for i, char in enumerate(text))


def tokenize_nmt(text, num_examples=None):
    """Split tab-separated 'source<TAB>target' lines into word lists.

    Returns:
        source, target: two lists of token lists, at most ``num_examples``
        pairs (the book's loop returned one pair too many).
    """
    source, target = [], []
    for line in text.split("\n"):
        if num_examples is not None and len(source) >= num_examples:
            break
        parts = line.split("\t")
        if len(parts) == 2:
            source.append(parts[0].split(" "))
            target.append(parts[1].split(" "))
    return source, target


def truncate_pad(line, num_steps, padding_token):
    """A new list of exactly ``num_steps`` tokens: ``line`` cut or padded."""
    if num_steps < 0:
        raise ValueError(f"expected num_steps >= 0, got {num_steps}")
    return list(line[:num_steps]) + [padding_token] * (num_steps - len(line))


def build_array_nmt(lines, vocab, num_steps):
    """Index, append '<eos>', cut or pad to ``num_steps``.

    Returns:
        array (N, num_steps) int64 and valid_len (N,): the number of tokens
        before padding, '<eos>' included. The book counted the tokens that are
        not '<pad>', which goes wrong when a sentence contains '<pad>' itself.
    """
    lines = [vocab[list(line)] + [vocab["<eos>"]] for line in lines]
    array = torch.tensor([truncate_pad(line, num_steps, vocab["<pad>"])
                          for line in lines], dtype=torch.long).reshape(-1, num_steps)
    valid_len = torch.tensor([min(len(line), num_steps) for line in lines],
                             dtype=torch.long)
    return array, valid_len


def load_array(data_arrays, batch_size, is_train=True, *, generator=None):
    """A DataLoader over tensors that share their first axis, shuffled when
    ``is_train``; pass a ``torch.Generator`` to make the order reproducible."""
    dataset = torch.utils.data.TensorDataset(*data_arrays)
    return torch.utils.data.DataLoader(dataset, batch_size, shuffle=is_train,
                                       generator=generator)


def _nmt_iter(source, target, batch_size, num_steps, generator=None):
    reserved = ["<pad>", "<bos>", "<eos>"]
    src_vocab = Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = Vocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = build_array_nmt(source, src_vocab, num_steps)
    tgt_array, tgt_valid_len = build_array_nmt(target, tgt_vocab, num_steps)
    data_iter = load_array((src_array, src_valid_len, tgt_array, tgt_valid_len),
                           batch_size, generator=generator)
    return data_iter, src_vocab, tgt_vocab


def load_data_nmt(batch_size, num_steps, num_examples=600, data_dir=None):
    """The book's English-French batches, from a local copy (see read_data_nmt).

    Returns:
        train_iter over batches ``X (B, num_steps), X_valid_len (B,),
        Y (B, num_steps), Y_valid_len (B,)``, src_vocab and tgt_vocab (tokens
        seen at least twice; '<unk>', '<pad>', '<bos>', '<eos>' reserved).
    """
    text = preprocess_nmt(read_data_nmt(data_dir))
    source, target = tokenize_nmt(text, num_examples)
    return _nmt_iter(source, target, batch_size, num_steps)


# --------------------------------------------------------------------------
# Synthetic translation data: dates in English words -> Chinese date format
# --------------------------------------------------------------------------
# Chosen over the other candidate, English number words -> Chinese numerals,
# by training the same small Bahdanau model on each (1000 pairs, 10 epochs):
# both reached 98% exact match, but the dates' attention was sharper (mean
# top weight 0.77 vs 0.62) and non-monotonic in 90 of 100 held-out examples
# against 5 for numbers, whose alignment is nearly a diagonal. Dates reorder:
# the year, said last, is written first, and 'the third of march' swaps day
# and month, so the heatmaps show attention jumping, not just sliding.

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve "
         "thirteen fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "- - twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = ("- first second third fourth fifth sixth seventh eighth ninth tenth "
             "eleventh twelfth thirteenth fourteenth fifteenth sixteenth "
             "seventeenth eighteenth nineteenth").split()
_MONTHS = ("january february march april may june july august september "
           "october november december").split()
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _words_below_100(n):
    if n < 20:
        return [_ONES[n]]
    return [_TENS[n // 10]] + ([_ONES[n % 10]] if n % 10 else [])


def _day_words(day):
    """3 -> ['third'], 20 -> ['twentieth'], 21 -> ['twenty', 'first']."""
    if day < 20:
        return [_ORDINALS[day]]
    if day % 10 == 0:
        return [_TENS[day // 10][:-1] + "ieth"]                # twentieth, thirtieth
    return [_TENS[day // 10], _ORDINALS[day % 10]]


def _year_words(year, rng):
    """As people say years: 'nineteen oh five', 'twenty twenty four',
    'two thousand (and) seven', 'nineteen hundred'."""
    century, rest = divmod(year, 100)
    if year >= 2000 and (year < 2010 or rng.random() < 0.3):
        words = ["two", "thousand"]
        if rest:
            words += ["and"] * (rng.random() < 0.5) + _words_below_100(rest)
        return words
    if rest == 0:
        return _words_below_100(century) + ["hundred"]
    if rest < 10:
        return _words_below_100(century) + ["oh", _ONES[rest]]
    return _words_below_100(century) + _words_below_100(rest)


def synthetic_translation_pairs(num_examples, seed=0):
    """Dates in English words and the same dates written the Chinese way.

    ``march third twenty twenty four`` -> ``2 0 2 4 年 3 月 3 日`` and
    ``the third of march`` -> ``3 月 3 日``. The year (1900-2099, left out in
    one date of five) is said last but written first, one digit per token;
    month and day numbers are one token each. Sources have 2 to 10 words.

    Args:
        num_examples: how many pairs.
        seed: the same seed gives the same pairs; use another seed for
            held-out pairs (a few dates may then occur in both).

    Returns:
        A list of ``(source_tokens, target_tokens)``, each a list of str.
    """
    if num_examples < 0:
        raise ValueError(f"expected num_examples >= 0, got {num_examples}")
    rng = random.Random(seed)
    pairs = []
    for _ in range(num_examples):
        month = rng.randrange(12)
        day = rng.randint(1, _MONTH_DAYS[month])
        year = rng.randint(1900, 2099)
        if rng.random() < 0.5:                                 # American: month, then day
            source = [_MONTHS[month]] + _day_words(day)
        else:                                                  # British: day of month
            source = ["the"] + _day_words(day) + ["of", _MONTHS[month]]
        target = [str(month + 1), "月", str(day), "日"]
        if rng.random() < 0.8:
            source += _year_words(year, rng)
            target = list(str(year)) + ["年"] + target
        pairs.append((source, target))
    return pairs


def load_data_synthetic(batch_size, num_steps, num_examples=1000, seed=0):
    """Batches of synthetic date translations, exactly like ``load_data_nmt``.

    Returns:
        train_iter over ``X (B, num_steps), X_valid_len (B,), Y (B, num_steps),
        Y_valid_len (B,)``, src_vocab and tgt_vocab ('<unk>', '<pad>',
        '<bos>', '<eos>' reserved as in the book), so ``train_seq2seq`` and
        ``predict_seq2seq`` run on it unchanged. Pairs and batch order are
        fixed by ``seed``.
    """
    pairs = synthetic_translation_pairs(num_examples, seed)
    source, target = [s for s, _ in pairs], [t for _, t in pairs]
    generator = torch.Generator().manual_seed(seed)            # reproducible shuffling
    return _nmt_iter(source, target, batch_size, num_steps, generator)


# --------------------------------------------------------------------------
# Encoder-decoder (RNN, Bahdanau attention), training and prediction
# --------------------------------------------------------------------------

class Encoder(nn.Module):
    """The encoder interface: ``forward(X, *args)`` -> encoder outputs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def forward(self, X, *args):
        """X (B, S) token indices -> whatever the decoder's init_state takes."""
        raise NotImplementedError


class Decoder(nn.Module):
    """The decoder interface: ``init_state(enc_outputs, *args)`` -> state,
    then ``forward(X, state)`` -> (outputs, new state)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def init_state(self, enc_outputs, *args):
        raise NotImplementedError

    def forward(self, X, state):
        """X (B, L) token indices, state -> (B, L, vocab_size), state."""
        raise NotImplementedError


class AttentionDecoder(Decoder):
    """A decoder that exposes ``attention_weights`` for plotting."""

    @property
    def attention_weights(self):
        raise NotImplementedError


class EncoderDecoder(nn.Module):
    """Encoder, then decoder: ``forward(enc_X, dec_X, *args)``; ``args``
    (e.g. the source's valid lengths) go to both."""

    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, *args):
        """enc_X (B, S), dec_X (B, L) -> (B, L, vocab_size), decoder state."""
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state)


def _check_tokens(X, name="X"):
    _check_rank(X, 2, name, "(B, steps) token indices")
    if X.is_floating_point():
        raise ValueError(f"expected {name} of integer token indices, got dtype {X.dtype}")


class Seq2SeqEncoder(Encoder):
    """Embedding, then a GRU over the source.

    Parameters ``embedding`` and ``rnn`` (``nn.GRU``, time-major), as in the
    book, so the book's ``state_dict`` loads.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0, **kwargs):
        super().__init__(**kwargs)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

    def forward(self, X, *args):
        """X (B, S) token indices, optional valid_lens (B,) ->
        outputs (S, B, h) and state (num_layers, B, h).

        With ``valid_lens`` the GRU stops at each sequence's end: the book's
        final state had also read the padding after '<eos>', and outputs at
        padded steps are 0 here."""
        _check_tokens(X)
        X = self.embedding(X).permute(1, 0, 2)                 # (S, B, embed) time-major
        valid_lens = args[0] if args and args[0] is not None else None
        if valid_lens is None:
            return self.rnn(X)                                 # (S, B, h), (layers, B, h)
        lengths = _check_seq_lens(valid_lens, X.shape[1], X.shape[0])
        packed = nn.utils.rnn.pack_padded_sequence(X, lengths, enforce_sorted=False)
        output, state = self.rnn(packed)
        output, _ = nn.utils.rnn.pad_packed_sequence(output, total_length=X.shape[0])
        return output, state                                   # (S, B, h), (layers, B, h)


def _check_seq_lens(valid_lens, batch_size, num_steps):
    """Lengths for packing: (B,) integers in 1..num_steps, on the CPU."""
    lengths = torch.as_tensor(valid_lens)
    if lengths.shape != (batch_size,) or lengths.is_floating_point():
        raise ValueError(f"expected integer valid_lens of shape ({batch_size},), "
                         f"got {lengths.dtype} of shape {tuple(lengths.shape)}")
    if lengths.numel() and (lengths.min() < 1 or lengths.max() > num_steps):
        raise ValueError(f"expected valid_lens in 1..{num_steps}, got {lengths.tolist()}")
    return lengths.cpu()


class Seq2SeqDecoder(Decoder):
    """The plain RNN decoder: every step sees one fixed context, the
    encoder's final top-layer state (the bottleneck attention removes).

    The state is ``(hidden_state (num_layers, B, h), context (B, h))``. The
    book kept only the hidden state and took ``state[-1]`` as the context, so
    at prediction time, one step per call, the context silently became the
    decoder's own last state instead of the encoder's.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0, **kwargs):
        super().__init__(**kwargs)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, *args):
        hidden_state = enc_outputs[1]                          # (layers, B, h)
        return hidden_state, hidden_state[-1]                  # context: (B, h)

    def forward(self, X, state):
        """X (B, L) token indices, state -> (B, L, vocab_size), new state."""
        _check_tokens(X)
        hidden_state, context = state
        X = self.embedding(X).permute(1, 0, 2)                 # (L, B, embed)
        context = context.expand(X.shape[0], -1, -1)           # (L, B, h): same at every step
        output, hidden_state = self.rnn(torch.cat((X, context), dim=2), hidden_state)
        return self.dense(output).permute(1, 0, 2), (hidden_state, state[1])  # (B, L, vocab)


class Seq2SeqAttentionDecoder(AttentionDecoder):
    """RNN decoder with Bahdanau (additive) attention over the encoder outputs.

    At each step the query is the decoder's previous top-layer hidden state;
    the context it pools is fed to the GRU together with the input token.
    Parameters ``attention`` (AdditiveAttention), ``embedding``, ``rnn``,
    ``dense``, as in the book. State: ``[enc_outputs (B, S, h),
    hidden_state (num_layers, B, h), enc_valid_lens (B,) or None]``.
    ``attention_weights`` is a list with one (B, 1, S) tensor per step.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers,
                 dropout=0, **kwargs):
        super().__init__(**kwargs)
        self.attention = AdditiveAttention(num_hiddens, num_hiddens,
                                           num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers,
                          dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        outputs, hidden_state = enc_outputs
        return [outputs.permute(1, 0, 2), hidden_state, enc_valid_lens]  # (B, S, h)

    def forward(self, X, state):
        """X (B, L) token indices, state -> (B, L, vocab_size), new state."""
        _check_tokens(X)
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)                 # (L, B, embed)
        outputs, self._attention_weights = [], []
        for x in X:                                            # x: (B, embed), one step
            query = hidden_state[-1].unsqueeze(1)              # (B, 1, h)
            context = self.attention(query, enc_outputs, enc_outputs,
                                     enc_valid_lens)           # (B, 1, h)
            x = torch.cat((context, x.unsqueeze(1)), dim=-1)   # (B, 1, h + embed)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)  # (1, B, h)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))        # (L, B, vocab)
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]

    @property
    def attention_weights(self):
        return self._attention_weights


class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    """Cross-entropy that ignores the padding after each target's end.

    ``forward(pred (B, T, vocab), label (B, T), valid_len (B,))`` -> (B,):
    per sequence, the sum of the losses at its first ``valid_len`` steps
    divided by T, as in the book. A sequence with ``valid_len == 0`` costs 0.
    """

    def forward(self, pred, label, valid_len):
        """pred (B, T, vocab), label (B, T), valid_len (B,) -> (B,)."""
        _check_rank(pred, 3, "pred", "(B, T, vocab_size)")
        if label.shape != pred.shape[:2]:
            raise ValueError(f"expected label of shape {tuple(pred.shape[:2])}, "
                             f"got {tuple(label.shape)}")
        keep = valid_lens_to_mask(valid_len, 1, label.shape[1])[:, 0]  # (B, T)
        losses = F.cross_entropy(pred.permute(0, 2, 1), label, reduction="none")  # (B, T)
        return (losses * keep.to(losses.dtype)).mean(dim=1)   # (B,)


def grad_clipping(net, theta):
    """Scale all gradients down so that their joint L2 norm is at most theta.

    Parameters without a gradient (unused in this step) are skipped; the
    book's version crashed on them.
    """
    params = [p for p in (net.parameters() if isinstance(net, nn.Module) else net.params)
              if p.requires_grad and p.grad is not None]
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    if norm > theta:
        for param in params:
            param.grad.mul_(theta / norm)


def _xavier_init_weights(module):
    if type(module) == nn.Linear:
        nn.init.xavier_uniform_(module.weight)
    if type(module) == nn.GRU:
        for name in module._flat_weights_names:
            if "weight" in name:
                nn.init.xavier_uniform_(module._parameters[name])


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device, *,
                  quiet=False):
    """Train an encoder-decoder with teacher forcing, as the book does.

    Xavier-initialises ``net`` (as the book), then Adam, MaskedSoftmaxCELoss
    and gradient clipping at 1. Every 10 epochs an Animator draws the loss,
    and at the end one line gives the loss and speed; ``quiet=True`` draws
    and prints nothing (fast, and clean in an executed deck).

    Returns:
        The loss per target token (padding excluded) of every epoch, a list.
        (The book printed the per-sequence mean over T divided by the number
        of tokens, which is not a per-token loss.) When a book cell ends with
        the call, Jupyter echoes one summary line, not hundreds of numbers.
    """
    net.apply(_xavier_init_weights)
    net.to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss = MaskedSoftmaxCELoss()
    net.train()
    animator = None if quiet else Animator(xlabel="epoch", ylabel="loss",
                                           xlim=[10, num_epochs])
    history, timer = _LossHistory(), Timer()
    for epoch in range(num_epochs):
        timer.start()
        metric = Accumulator(2)                                # loss sum, tokens
        for batch in data_iter:
            optimizer.zero_grad()
            X, X_valid_len, Y, Y_valid_len = [x.to(device) for x in batch]
            bos = torch.full((Y.shape[0], 1), tgt_vocab["<bos>"], device=device)
            dec_input = torch.cat([bos, Y[:, :-1]], 1)         # teacher forcing: (B, T)
            Y_hat, _ = net(X, dec_input, X_valid_len)
            l = loss(Y_hat, Y, Y_valid_len)                    # (B,)
            l.sum().backward()
            grad_clipping(net, 1)
            optimizer.step()
            with torch.no_grad():
                metric.add(l.sum() * Y.shape[1], Y_valid_len.sum())
        timer.stop()
        history.append(metric[0] / metric[1])
        if animator is not None and (epoch + 1) % 10 == 0:
            animator.add(epoch + 1, (history[-1],))
    if not quiet:
        print(f"loss {history[-1]:.3f}, {metric[1] * num_epochs / timer.sum():.1f} "
              f"tokens/sec on {device}")
    return history


class _LossHistory(list):
    """A list whose echo in Jupyter is one line; print() shows every value."""

    def _repr_pretty_(self, printer, cycle):
        if not self:
            printer.text("[]")
            return
        printer.text(f"per-token loss of {len(self)} epochs: {self[0]:.3f} -> {self[-1]:.3f}")


def _model_device(net):
    parameter = next(net.parameters(), None)
    return torch.device("cpu") if parameter is None else parameter.device


def predict_seq2seq(net, src_sentence, src_vocab, tgt_vocab, num_steps,
                    device, save_attention_weights=False):
    """Greedy decoding of one sentence, as in the book.

    Args:
        src_sentence: space-separated source words (lower-cased here).
        device: must be the device ``net`` is on; a different one raises a
            ValueError naming both (the book silently built inputs there).

    Returns:
        The translation (a string) and, if ``save_attention_weights``, one
        entry of ``net.decoder.attention_weights`` per generated step.

    Runs in eval mode without gradients and restores the training mode that
    ``net`` had; nothing given is written to.
    """
    _check_predict_args(net, device, num_steps)
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad():
            return _greedy_decode(net, src_sentence, src_vocab, tgt_vocab,
                                  num_steps, device, save_attention_weights)
    finally:
        net.train(was_training)


def _check_predict_args(net, device, num_steps):
    model_device = _model_device(net)
    if torch.device(device) != model_device:
        raise ValueError(f"expected device to be the model's device {model_device}, "
                         f"got {torch.device(device)}; move the model with "
                         f"net.to(device) or pass device={str(model_device)!r}")
    if num_steps < 1:
        raise ValueError(f"expected num_steps >= 1, got {num_steps}")


def _greedy_decode(net, src_sentence, src_vocab, tgt_vocab, num_steps, device,
                   save_attention_weights):
    src_tokens = src_vocab[src_sentence.lower().split(" ")] + [src_vocab["<eos>"]]
    # A source longer than num_steps is cut; its valid length must be too.
    enc_valid_len = torch.tensor([min(len(src_tokens), num_steps)], device=device)
    src_tokens = truncate_pad(src_tokens, num_steps, src_vocab["<pad>"])
    enc_X = torch.tensor([src_tokens], dtype=torch.long, device=device)  # (1, S)
    enc_outputs = net.encoder(enc_X, enc_valid_len)
    dec_state = net.decoder.init_state(enc_outputs, enc_valid_len)
    dec_X = torch.tensor([[tgt_vocab["<bos>"]]], dtype=torch.long, device=device)  # (1, 1)
    output_seq, attention_weight_seq = [], []
    for _ in range(num_steps):
        Y, dec_state = net.decoder(dec_X, dec_state)           # (1, 1, vocab)
        dec_X = Y.argmax(dim=2)                                # the best token is the next input
        pred = dec_X.item()
        if save_attention_weights:
            attention_weight_seq.append(net.decoder.attention_weights)
        if pred == tgt_vocab["<eos>"]:
            break
        output_seq.append(pred)
    return " ".join(tgt_vocab.to_tokens(output_seq)), attention_weight_seq


def bleu(pred_seq, label_seq, k):
    """BLEU of one prediction against one label, both space-separated, as in
    the book: exp(min(0, 1 - len_label / len_pred)) * prod_n p_n^(1/2^n),
    n = 1..k, where p_n is the clipped n-gram precision.

    Defined everywhere, unlike the book's (which divided by zero or took
    roots of negatives): an empty prediction scores 0 (1 if the label is
    empty too); an order n that neither side is long enough for is skipped;
    one that only the label has n-grams for gives p_n = 0.
    """
    if k < 1:
        raise ValueError(f"expected k >= 1, got {k}")
    pred_tokens, label_tokens = pred_seq.split(), label_seq.split()
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    if len_pred == 0:
        return float(len_label == 0)
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, k + 1):
        num_pred_ngrams = len_pred - n + 1
        if num_pred_ngrams <= 0:
            if len_label - n + 1 > 0:
                return 0.0                                     # label has n-grams, pred none
            continue                                           # neither side has n-grams
        label_subs = collections.Counter(
            tuple(label_tokens[i:i + n]) for i in range(len_label - n + 1))
        pred_subs = collections.Counter(
            tuple(pred_tokens[i:i + n]) for i in range(num_pred_ngrams))
        num_matches = sum(min(c, label_subs[g]) for g, c in pred_subs.items())
        score *= math.pow(num_matches / num_pred_ngrams, math.pow(0.5, n))
    return score


# --------------------------------------------------------------------------
# Transformer (d2l-zh 10.7)
# --------------------------------------------------------------------------

class PositionWiseFFN(nn.Module):
    """The same two-layer MLP at every position: dense2(relu(dense1(X))).

    Parameters ``dense1`` (ffn_num_input -> ffn_num_hiddens) and ``dense2``
    (ffn_num_hiddens -> ffn_num_outputs), as in the book.
    """

    def __init__(self, ffn_num_input, ffn_num_hiddens, ffn_num_outputs, **kwargs):
        super().__init__(**kwargs)
        self.dense1 = nn.Linear(ffn_num_input, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        """X (B, n, ffn_num_input) -> (B, n, ffn_num_outputs)."""
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """Residual connection, then layer normalisation: ln(dropout(Y) + X).

    LayerNorm, not BatchNorm: each position is normalised over its own
    features, so padding and batch composition do not change a sentence.
    Parameters ``ln`` (``nn.LayerNorm(normalized_shape)``).
    """

    def __init__(self, normalized_shape, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, X, Y):
        """X (B, n, h) the block's input, Y (B, n, h) its sublayer's output
        -> (B, n, h)."""
        if X.shape != Y.shape:
            raise ValueError(f"expected X and Y of one shape, got {tuple(X.shape)} "
                             f"and {tuple(Y.shape)}")
        return self.ln(self.dropout(Y) + X)


class EncoderBlock(nn.Module):
    """Self-attention and a position-wise FFN, each followed by AddNorm
    (post-norm, as in the paper and ``nn.TransformerEncoderLayer``).

    Parameters ``attention`` (MultiHeadAttention), ``addnorm1``, ``ffn``,
    ``addnorm2``, as in the book.
    """

    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
                 dropout, use_bias=False, **kwargs):
        super().__init__(**kwargs)
        self.attention = MultiHeadAttention(key_size, query_size, value_size,
                                            num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(norm_shape, dropout)
        self.ffn = PositionWiseFFN(ffn_num_input, ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(norm_shape, dropout)

    def forward(self, X, valid_lens=None):
        """X (B, S, h), valid_lens None or (B,) -> (B, S, h)."""
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))  # every position sees every valid one
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(Encoder):
    """Embedding * sqrt(h) + positional encoding, then ``num_layers``
    EncoderBlocks (``blks.block0``, ...). ``attention_weights`` holds each
    block's (B*H, S, S) weights after a forward pass.
    """

    def __init__(self, vocab_size, key_size, query_size, value_size,
                 num_hiddens, norm_shape, ffn_num_input, ffn_num_hiddens,
                 num_heads, num_layers, dropout, use_bias=False, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_layers):
            self.blks.add_module(f"block{i}", EncoderBlock(
                key_size, query_size, value_size, num_hiddens, norm_shape,
                ffn_num_input, ffn_num_hiddens, num_heads, dropout, use_bias))

    def forward(self, X, valid_lens=None, *args):
        """X (B, S) token indices, valid_lens None or (B,) -> (B, S, h)."""
        _check_tokens(X)
        # The paper scales by sqrt(h) because its embeddings start near
        # N(0, 1/h), which puts them on the scale of the positional encoding
        # (entries in [-1, 1]). nn.Embedding starts at N(0, 1), as in the
        # book, so here they start sqrt(h) times larger (deck 07 measures it).
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))  # (B, S, h)
        self.attention_weights = [None] * len(self.blks)
        for i, blk in enumerate(self.blks):
            X = blk(X, valid_lens)                             # (B, S, h)
            self.attention_weights[i] = blk.attention.attention.attention_weights
        return X


class DecoderBlock(nn.Module):
    """Masked self-attention, encoder-decoder attention and an FFN, each
    followed by AddNorm. Block ``i`` of the decoder.

    ``state`` is ``[enc_outputs (B, S, h), enc_valid_lens, cache]``, where
    ``cache[i]`` holds this block's inputs at all earlier steps (B, t, h) or
    None: at prediction time the new token's query attends to them, so the
    earlier steps are never recomputed. The block appends to ``cache[i]``.

    Query t may only see keys up to its own position, in training and in
    evaluation alike. (The book masked the future only in training mode: in
    eval mode a whole target sequence saw its future.)
    """

    def __init__(self, key_size, query_size, value_size, num_hiddens,
                 norm_shape, ffn_num_input, ffn_num_hiddens, num_heads,
                 dropout, i, **kwargs):
        super().__init__(**kwargs)
        self.i = i
        self.attention1 = MultiHeadAttention(key_size, query_size, value_size,
                                             num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(norm_shape, dropout)
        self.attention2 = MultiHeadAttention(key_size, query_size, value_size,
                                             num_hiddens, num_heads, dropout)
        self.addnorm2 = AddNorm(norm_shape, dropout)
        self.ffn = PositionWiseFFN(ffn_num_input, ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(norm_shape, dropout)

    def forward(self, X, state):
        """X (B, L, h) the new steps, state -> (B, L, h), state."""
        enc_outputs, enc_valid_lens, cache = state
        past = 0 if cache[self.i] is None else cache[self.i].shape[1]
        key_values = X if cache[self.i] is None else torch.cat((cache[self.i], X), dim=1)  # (B, past+L, h)
        cache[self.i] = key_values
        # Causal mask: the query at position past+t sees keys 0..past+t.
        dec_valid_lens = past + causal_valid_lens(X.shape[0], X.shape[1], X.device)  # (B, L)
        Y = self.addnorm1(X, self.attention1(X, key_values, key_values, dec_valid_lens))
        Z = self.addnorm2(Y, self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens))
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(AttentionDecoder):
    """Embedding * sqrt(h) + positional encoding, ``num_layers`` DecoderBlocks,
    then ``dense`` to the vocabulary.

    ``attention_weights`` is ``[self-attention, encoder-decoder attention]``,
    each a list with one (B*H, L, keys) tensor per block. At prediction time
    a new token is encoded at its true position (the book gave every
    one-token step position 0).
    """

    def __init__(self, vocab_size, key_size, query_size, value_size,
                 num_hiddens, norm_shape, ffn_num_input, ffn_num_hiddens,
                 num_heads, num_layers, dropout, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = num_hiddens
        self.num_layers = num_layers
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for i in range(num_layers):
            self.blks.add_module(f"block{i}", DecoderBlock(
                key_size, query_size, value_size, num_hiddens, norm_shape,
                ffn_num_input, ffn_num_hiddens, num_heads, dropout, i))
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        return [enc_outputs, enc_valid_lens, [None] * self.num_layers]

    def forward(self, X, state):
        """X (B, L) token indices, state -> (B, L, vocab_size), state."""
        _check_tokens(X)
        cache = state[2][0]
        past = 0 if cache is None else cache.shape[1]          # steps decoded before
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens),
                              offset=past)                     # (B, L, h)
        self._attention_weights = [[None] * len(self.blks) for _ in range(2)]
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)                           # (B, L, h)
            self._attention_weights[0][i] = blk.attention1.attention.attention_weights
            self._attention_weights[1][i] = blk.attention2.attention.attention_weights
        return self.dense(X), state                            # (B, L, vocab)

    @property
    def attention_weights(self):
        return self._attention_weights


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


# The course figure style, set here once for every deck: decks never set
# font sizes themselves. A figure is read from the back row on a 1280x720
# slide, where body text is 24 px; every text in a figure must be at least
# MIN_TEXT_PX tall as displayed. At 100 dpi a point is 100/72 px, so the
# smallest size here (13 pt) is 18 px at full size and stays >= 16 px down
# to a shrink of 0.89, i.e. for figures up to about 1350 px wide.
COURSE_STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": "figure",
    "figure.constrained_layout.use": True,    # labels, colour bars and outside legends fit
    "font.size": 14,
    "axes.titlesize": 15,
    "axes.labelsize": 14,
    "xtick.labelsize": 13,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "legend.title_fontsize": 13,
    "figure.titlesize": 16,
    "lines.linewidth": 2.2,
    "lines.markersize": 7,
    "axes.linewidth": 1.0,
    "legend.loc": "best",
    "legend.framealpha": 0.9,
    "image.interpolation": "nearest",         # heatmap cells stay crisp squares
}
MIN_TEXT_PX = 16            # smallest figure text a student sees on a slide
SLIDE_IMAGE_WIDTH_PX = 1200  # widest image a 1280x720 slide shows unscaled (measured: 1216)
SLIDE_IMAGE_HEIGHT_PX = 560  # slides/course.css caps images at this height


def _use_course_style():
    _use_cjk_fonts()
    plt.rcParams.update(COURSE_STYLE)


_use_course_style()


def _figure_report(fig):
    """What a student can read of ``fig``: its smallest text and covered data.

    Returns a dict with
        min_text_pt: the smallest font size (points) of any drawn, non-empty
            text: titles, axis and tick labels, legends, colour-bar labels,
            annotations. On a slide it is ``_displayed_text_px(...)`` tall.
        legend_overlaps: how many data artists (lines, markers, bars, bands)
            a legend inside an axes covers; 0 means no legend hides data.
        axes_limits: [[x0, x1, y0, y1], ...] of every axes without an image,
            so frames of an interactive figure can be checked to share axes.

    Every PNG the module renders carries this report in its metadata
    (``au:min_text_pt``, ``au:legend_overlaps``), so tests check a deck's
    stored figures without re-running it.
    """
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection
    from matplotlib.patches import Rectangle
    from matplotlib.text import Text

    fig.draw_without_rendering()                  # places 'best' legends and ticks
    renderer = fig._get_renderer()                 # works for any canvas, inline included
    hidden = set()                                # labels of ticks outside the view
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * (high - low)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - slack <= tick.get_loc() <= high + slack:
                    hidden.update((tick.label1, tick.label2))
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and t not in hidden
             and t.get_window_extent(renderer).overlaps(fig.bbox)]
    overlaps = 0
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        for artist in ax.get_children():
            if not artist.get_visible():
                continue
            if isinstance(artist, matplotlib.lines.Line2D):
                path = artist.get_transform().transform_path(artist.get_path())
                hit = (box.count_contains(path.vertices) > 0 if artist.get_linestyle() in ("None", "")
                       else path.intersects_bbox(box, filled=False))
            elif isinstance(artist, PathCollection):            # scatter markers
                hit = box.count_contains(artist.get_offset_transform().transform(artist.get_offsets())) > 0
            elif isinstance(artist, (LineCollection, PolyCollection)):  # stems, bands
                transform = artist.get_transform()
                hit = any(transform.transform_path(p).intersects_bbox(
                    box, filled=isinstance(artist, PolyCollection)) for p in artist.get_paths())
            elif isinstance(artist, Rectangle) and artist is not ax.patch:  # bars
                hit = artist.get_window_extent(renderer).overlaps(box)
            else:
                continue
            overlaps += bool(hit)
    limits = [[round(v, 6) for v in (*ax.get_xlim(), *ax.get_ylim())]
              for ax in fig.axes if not ax.images and not hasattr(ax, "_colorbar")
              and ax.get_visible() and ax.axison]
    return {"min_text_pt": min(sizes, default=float("inf")), "legend_overlaps": overlaps,
            "axes_limits": limits}


def _displayed_text_px(min_text_pt, dpi, width_px, height_px):
    """How tall text of ``min_text_pt`` is on a 1280x720 slide, in px.

    An image wider than the slide's content or taller than the image cap is
    shrunk to fit, and its text with it.
    """
    shrink = min(1.0, SLIDE_IMAGE_WIDTH_PX / width_px, SLIDE_IMAGE_HEIGHT_PX / height_px)
    return min_text_pt * dpi / 72 * shrink


def _png(fig, tight=True):
    """PNG bytes of ``fig`` with its ``_figure_report`` in the metadata.

    ``tight=False`` keeps the figure's own size, so frames of one interactive
    figure all have the same size and axes.
    """
    from IPython.core.pylabtools import print_figure  # the inline backend's own renderer

    report = _figure_report(fig)
    metadata = {"au:min_text_pt": f"{report['min_text_pt']:g}",
                "au:legend_overlaps": str(report["legend_overlaps"]),
                "au:axes_limits": json.dumps(report["axes_limits"])}
    return print_figure(fig, "png", bbox_inches="tight" if tight else None, metadata=metadata)


def _register_png_formatter():
    """Figures shown by Jupyter's inline backend carry the report as well."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import base64

    shell.display_formatter.formatters["image/png"].for_type(
        Figure, lambda fig: base64.b64encode(_png(fig)).decode("ascii"))


_register_png_formatter()


class _ShownOnceFigure(Figure):
    """A Figure that Jupyter shows once, whether a cell ends with it or not.

    The inline backend shows, when a cell ends, every figure the cell left
    open in pyplot. A Figure that is also the cell's value would show a second
    time. So displaying this one shows its PNG and closes it in pyplot, which
    takes it out of that end-of-cell flush. Draw everything before displaying.
    """

    def _ipython_display_(self):
        from IPython.display import display

        display({"image/png": _png(self)}, raw=True)
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
                  cmap="Reds", *, mask=None, share_scale=True, vmax=None):
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
        vmax: top of the colour scale for every panel (default: the largest
            shown value). Frames of an interactive figure that should be
            compared share one, e.g. ``vmax=1`` for attention weights.

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
    top = vmax
    vmin, vmax = _colour_range(matrices[keep])
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            if not share_scale:
                vmin, vmax = _colour_range(matrices[i, j][keep[i, j]])
            vmax = vmax if top is None else top
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


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"),
         figsize=(3.5, 2.5), axes=None):
    """Plot curves, as ``d2l.plot`` does, and return the Figure.

    Args:
        X: x values (k,), shared by every curve, or a list with one per curve.
        Y: one curve (k,), a list of curves, or a 2-D tensor of curves (rows);
            None plots X's curves against their indices 0, 1, ..., as the book.
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

    if Y is None:                                              # the book's plot(Y)
        X, Y = None, as_list(X)
        X = [torch.arange(len(y)) for y in Y]
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


def show_source(obj, docstring=False, checks=False, comments=False):
    """Syntax-highlighted source of a function, class or method, for a slide.

    Decks put implementations on slides with this instead of copying them, so
    a slide always shows the code that actually runs. A slide shows the idea:
    the docstring, the input checks (``_check_*(...)`` calls, ``if ...: raise``
    guards and loops that only check) and whole-line comments are left out
    unless asked for; comments at the end of a line (the shapes) stay. What is
    left is the code exactly as it runs once the input is valid.
    """
    from IPython.display import Code  # only the decks need IPython

    source = textwrap.dedent(inspect.getsource(obj))
    drop = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, statement in enumerate(body):
            is_docstring = (i == 0 and isinstance(node, (ast.FunctionDef, ast.ClassDef))
                            and isinstance(statement, ast.Expr)
                            and isinstance(statement.value, ast.Constant)
                            and isinstance(statement.value.value, str))
            if (is_docstring and not docstring) or (_is_check(statement) and not checks):
                drop.update(range(statement.lineno - 1, statement.end_lineno))
    lines = [line for i, line in enumerate(source.splitlines())
             if i not in drop and (comments or not line.lstrip().startswith("#"))]
    text = "\n".join(lines)
    try:
        ast.parse(text)
    except SyntaxError:  # a block held nothing but checks: show them rather than break it
        return show_source(obj, docstring, checks=True, comments=comments)
    return Code(text, language="python")


def _is_check(statement):
    """An input check: ``_check_...(...)`` (also assigned), ``if ...: raise ...``,
    or a loop whose body only checks."""
    value = getattr(statement, "value", None)
    if isinstance(statement, (ast.Expr, ast.Assign)) and isinstance(value, ast.Call):
        return getattr(value.func, "id", "").startswith("_check")
    if isinstance(statement, ast.If):
        return not statement.orelse and all(isinstance(s, ast.Raise) for s in statement.body)
    if isinstance(statement, ast.For):
        return not statement.orelse and all(_is_check(s) for s in statement.body)
    return False


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
        frames.append(_png(fig, tight=False))
        plt.close(fig)                 # shown as a frame, never by the inline flush
    return _InteractiveFigure(names, sliders, frames)
