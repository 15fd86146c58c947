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
import hashlib
import html
import inspect
import itertools
import json
import math
import os
import random
import re
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
    "describe",
    # interactive figures (live, offline and unrun)
    "Slider",
    "interactive",
    # concept questions (live, offline and unrun)
    "quiz",
    "load_quizzes",
    # self-check exercises: check_<name>(the student's function)
    "check_attention_pooling",
    "check_softmax",
    "check_nw_regression",
    "check_leave_one_out",
    "check_masked_softmax",
    "check_scaled_dot_product",
    "check_transpose_qkv",
    "check_multihead_forward",
    "check_positional_encoding",
    "check_causal_mask",
    "check_additive_scores",
    "check_bahdanau_step",
    "check_add_norm",
    "check_pre_norm",
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
        # queries (L*E numbers) instead of the scores (L*S) is cheaper when
        # S > E, the usual case for long sequences.
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
# the year, said last, is written first, and 'the fifth of march' swaps day
# and month (3 月 5 日), so the heatmaps show attention jumping, not just sliding.

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

    ``march fifth twenty twenty four`` -> ``2 0 2 4 年 3 月 5 日`` and
    ``the fifth of march`` -> ``3 月 5 日``. The year (1900-2099, left out in
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
        # The paper (section 3.4) multiplies the embeddings by sqrt(h) and does
        # not say how it initialises them; with the common N(0, 1/h) start
        # that puts them on the scale of the positional encoding (entries in
        # [-1, 1]). nn.Embedding starts at N(0, 1), as in the book, so here
        # they start sqrt(h) times larger (deck 07 measures it).
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


# Sub- and superscripts in figure text ('$k_1$', the exponents of a log axis) at 0.9 of the
# text instead of matplotlib's 0.7, so 13 pt tick labels keep 16 px scripts on a slide.
# matplotlib has no setting for it: this is its mathtext module's SHRINK_FACTOR.
SCRIPT_SCALE = 0.9


def _use_course_style():
    _use_cjk_fonts()
    plt.rcParams.update(COURSE_STYLE)
    import matplotlib._mathtext as mathtext
    mathtext.SHRINK_FACTOR = SCRIPT_SCALE


_use_course_style()


_MATH = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$")


def _smallest_glyph_pt(text):
    """The font size of the smallest glyphs of a Text: its size, or for mathtext with a
    sub- or superscript ('$k_1$', '$10^{-4}$' on a log axis) the script's size, which
    mathtext draws smaller by its SHRINK_FACTOR (the course sets SCRIPT_SCALE)."""
    import matplotlib._mathtext as mathtext
    size = text.get_fontsize()
    if any(re.search(r"[_^]", part) for part in _MATH.findall(text.get_text())):
        size *= mathtext.SHRINK_FACTOR
    return size


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
    sizes = [_smallest_glyph_pt(t) for t in fig.findobj(Text)
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
    """PNG bytes of ``fig`` with its ``_figure_report`` and its text
    alternative in the metadata (see ``_png_and_alt``).

    ``tight=False`` keeps the figure's own size, so frames of one interactive
    figure all have the same size and axes.
    """
    return _png_and_alt(fig, tight)[0]


def _png_and_alt(fig, tight=True):
    """(PNG bytes, text alternative) of ``fig``.

    The PNG's metadata holds the figure report (``au:min_text_pt``,
    ``au:legend_overlaps``, ``au:axes_limits``) and the text alternative
    under PNG's standard ``Description`` key, so it travels with the image.
    """
    from IPython.core.pylabtools import print_figure  # the inline backend's own renderer

    report, alt = _figure_report(fig), _figure_alt(fig)
    metadata = {"au:min_text_pt": f"{report['min_text_pt']:g}",
                "au:legend_overlaps": str(report["legend_overlaps"]),
                "au:axes_limits": json.dumps(report["axes_limits"]),
                "Description": alt}
    return print_figure(fig, "png", bbox_inches="tight" if tight else None, metadata=metadata), alt


def _register_png_formatter():
    """Figures shown by Jupyter's inline backend carry the report and their
    text alternative, which goes into the output's metadata as
    ``{"image/png": {"alt": ...}}`` (the offline slides put it on the <img>)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import base64

    def png_with_alt(fig):
        png, alt = _png_and_alt(fig)
        return base64.b64encode(png).decode("ascii"), {"alt": alt}  # (data, metadata)

    formatter = shell.display_formatter.formatters["image/png"]

    def register(*_):
        if formatter.lookup_by_type(Figure) is not png_with_alt:
            formatter.for_type(Figure, png_with_alt)

    # The inline backend installs its own PNG renderer when it starts, which
    # is when the first figure is made (or on `%matplotlib inline`): start it
    # now, and take the renderer back before every cell in case it reran.
    if "inline" in str(matplotlib.get_backend()):
        import matplotlib_inline.backend_inline  # noqa: F401  (starts the integration)
    register()
    shell.events.register("pre_run_cell", register)


_register_png_formatter()


# ---- Text alternatives of figures ----------------------------------------
# Every figure the module renders says in words what it shows, for a screen
# reader and for the PDF handouts: the text given with ``alt=`` (show_heatmaps,
# plot), else one built when the figure is rendered, so labels and tick labels
# a deck adds after the call count. Heatmaps: their shape, their axes and
# where the largest values lie; other plots: titles, axis labels, legends.

MAX_ALT_CHARS = 400


def describe(fig, text):
    """Give ``fig`` a text alternative: what it shows, in words (Chinese).

    A screen reader reads it in the offline slides, and the PDF handouts keep
    it. Figures drawn by ``show_heatmaps`` and ``plot`` already get one from
    their titles and labels (``alt=`` replaces it); use this where the point
    of a figure needs words, e.g. '热力图：权重集中在反对角线上'. Returns ``fig``.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"expected a non-empty str describing the figure, got {text!r}")
    fig._au_alt = text
    return fig


def _figure_alt(fig):
    """The text alternative of ``fig`` (Chinese), at most MAX_ALT_CHARS long."""
    text = getattr(fig, "_au_alt", None)
    if not text:
        heatmaps = getattr(fig, "_au_heatmaps", None)
        try:
            text = _heatmaps_alt(fig, **heatmaps) if heatmaps else _plot_alt(fig)
        except Exception:                   # a figure reshaped oddly: say less, but still show it
            text = "一幅图（没能自动生成文字说明）。"
        title = fig._suptitle.get_text() if fig._suptitle is not None else ""
        text = f"{_plain(title)}。{text}" if title.strip() else text
    return text if len(text) <= MAX_ALT_CHARS else text[:MAX_ALT_CHARS - 1] + "…"


# Mathtext commands a screen reader should say as a symbol (the rest are dropped).
_MATH_SYMBOLS = {"alpha": "α", "beta": "β", "sigma": "σ", "mu": "μ", "theta": "θ", "delta": "δ",
                 "top": "ᵀ", "sqrt": "√", "times": "×", "cdot": "·", "sum": "∑", "ldots": "…",
                 "cdots": "⋯", "infty": "∞", "le": "≤", "ge": "≥", "to": "→", "rightarrow": "→"}


def _plain(text):
    """Figure text as a screen reader should say it: '$\\mathbf{q}_1$' -> 'q_1'.

    Mathtext dollars, braces and font commands (\\mathbf, \\mathrm, ...) go; a
    few symbols become their Unicode character.
    """
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _MATH_SYMBOLS.get(m.group(1), ""), text)
    text = text.replace("$", "").replace("{", "").replace("}", "").replace("^ᵀ", "ᵀ")
    return " ".join(text.split())


def _data_axes(fig):
    """The axes that show data (colour bars left out)."""
    return [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")
            and ax.get_label() != "<colorbar>"]


def _plot_alt(fig):
    """'曲线图「title」：横轴 x（0 到 5），纵轴 y；图例：a、b' for every axes
    ('示意图：label、label' for an axes drawn without axis lines)."""
    parts = []
    for ax in _data_axes(fig):
        if not ax.axison:                   # a diagram: say what its labels say
            words = [_plain(t.get_text()) for t in ax.texts if t.get_visible() and t.get_text().strip()]
            title = _plain(ax.get_title())
            parts.append("示意图" + (f"「{title}」" if title else "") + ("：" + "、".join(words[:12]) if words else ""))
            continue
        kinds = []
        if any(line.get_linestyle() not in ("None", "") for line in ax.lines):
            kinds.append("曲线")
        if any(line.get_linestyle() in ("None", "") for line in ax.lines) or any(
                isinstance(c, matplotlib.collections.PathCollection) for c in ax.collections):
            kinds.append("散点")
        if any(isinstance(p, matplotlib.patches.Rectangle) for p in ax.patches):
            kinds.append("柱状")
        if any(isinstance(c, matplotlib.collections.LineCollection) for c in ax.collections):
            kinds.append("竖线")
        if ax.images:
            kinds.append("图像")
        part = ("、".join(kinds) or "空白的") + "图"
        if ax.get_title().strip():
            part += f"「{_plain(ax.get_title())}」"
        axes_text = []
        for name, label, limits in (("横轴", ax.get_xlabel(), ax.get_xlim()), ("纵轴", ax.get_ylabel(), ax.get_ylim())):
            if label.strip() or ax.axison:
                axes_text.append(f"{name}{(' ' + _plain(label)) if label.strip() else ''}"
                                 f"（{limits[0]:.3g} 到 {limits[1]:.3g}）")
        if axes_text:
            part += "：" + "，".join(axes_text)
        legend = ax.get_legend()
        if legend is not None:
            part += "；图例：" + "、".join(_plain(t.get_text()) for t in legend.get_texts())
        parts.append(part)
    legends = [_plain(t.get_text()) for legend in fig.legends for t in legend.get_texts()]
    if legends:
        parts.append("图例：" + "、".join(legends))
    return "；".join(parts) + "。" if parts else "空白的图。"


def _heatmaps_alt(fig, matrices, keep, scale, xlabel, ylabel, gamma=None):
    """'热力图：10 个查询 × 10 个键，权重集中在对角线上' for a grid of panels."""
    rows, cols, L, S = matrices.shape
    panels = [ax for ax in _data_axes(fig) if ax.images]
    x_name, y_name = _plain(str(xlabel or "")), _plain(str(ylabel or ""))
    shape = f"{L} 个{y_name} × {S} 个{x_name}" if x_name and y_name else f"{L} 行 × {S} 列"
    row_sums = (matrices * keep).sum(dim=-1)                   # weights: each row sums to 1 (or 0)
    is_weight = bool(keep.any()) and matrices[keep].min() >= 0 and bool(
        ((row_sums - 1).abs() < 1e-3).logical_or(row_sums.abs() < 1e-3).all())
    word = "权重" if is_weight else "数值"
    if rows * cols == 1:
        title = _plain(panels[0].get_title())
        text = (f"热力图{f'「{title}」' if title else ''}：{shape}，"
                f"{_matrix_pattern(matrices[0, 0], keep[0, 0], panels[0], word)}")
    else:
        text = f"热力图，{rows} 行 × {cols} 列共 {rows * cols} 幅，每幅 {shape}"
        for k, ax in enumerate(panels[:6]):
            r, c = divmod(k, cols)
            title, row_label = _plain(ax.get_title()), _plain(panels[r * cols].get_ylabel())
            row = (row_label if row_label and row_label != y_name else f"第 {r + 1} 行") if rows > 1 else ""
            name = f"{row}第 {c + 1} 幅" + (f"「{title}」" if title else "")
            text += f"；{name}：{_matrix_pattern(matrices[r, c], keep[r, c], ax, word)}"
        if len(panels) > 6:
            text += f"；其余 {len(panels) - 6} 幅从略"
    text += (f"。色标从 {scale[0]:.2g} 到 {scale[1]:.2g}" if scale is not None
             else "。每幅各用自己的色标")
    if gamma is not None:
        text += "，按平方根拉伸" if gamma == 0.5 else f"，按 {gamma:g} 次方拉伸"
    if not keep.all():
        text += "；灰底斜线格是被掩蔽的位置"
    return text + "。"


def _matrix_pattern(matrix, keep, ax, word):
    """Where the largest values of one (L, S) panel lie, in words."""
    L, S = matrix.shape
    if not keep.any():
        return "全部被掩蔽"
    high = matrix.masked_fill(~keep, -math.inf).amax(dim=1)    # each row's largest and smallest
    low = matrix.masked_fill(~keep, math.inf).amin(dim=1)
    wide = keep.sum(dim=1) >= 2                                # rows with a choice to make
    if wide.any() and ((high - low)[wide] <= 0.02 * high[wide].abs().clamp(min=1e-12)).all():
        return f"{word}在每一行里几乎均匀"
    rows = keep.any(dim=1)                                     # rows with something shown
    top = matrix.masked_fill(~keep, -math.inf).argmax(dim=1)[rows]  # each row's largest column
    index = torch.arange(L)[rows]

    def share(hits):                          # 'every row' only when it is every row
        count = int(hits.sum())
        return "" if count == len(hits) else f"（{len(hits)} 行中的 {count} 行）"

    for hits, where in ((top == index, "对角线"), (top == S - 1 - index, "反对角线")):
        if L == S >= 3 and hits.float().mean() >= 0.8:
            return f"{word}集中在{where}上{share(hits)}"
    column = top.mode().values.item()
    hits = top == column
    if L >= 3 and hits.float().mean() >= 0.8:
        rows_word = "每一行" if hits.all() else f"{len(hits)} 行中有 {int(hits.sum())} 行"
        return f"{rows_word}的最大{word}在列 {column}{_tick_name(ax, 'x', column)}"
    flat = matrix.masked_fill(~keep, -math.inf).argmax().item()
    i, j = divmod(flat, S)                    # counted from 0, as the axes' ticks are
    return (f"最大{word} {matrix[i, j].item():.2g} 在行 {i}{_tick_name(ax, 'y', i)}、"
            f"列 {j}{_tick_name(ax, 'x', j)}（从 0 数起）")


def _tick_name(ax, axis, position):
    """'（march）' when that axis has a word as the tick label at this
    position (a deck's token labels), else ''. Numbers say nothing new."""
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    for tick, label in zip(ticks, labels):
        text = _plain(label.get_text())
        if tick == position and text and not _is_number(text):
            return f"（{text}）"
    return ""


def _is_number(text):
    try:
        float(text.replace("−", "-"))
    except ValueError:
        return False
    return True


class _ShownOnceFigure(Figure):
    """A Figure that Jupyter shows once, whether a cell ends with it or not.

    The inline backend shows, when a cell ends, every figure the cell left
    open in pyplot. A Figure that is also the cell's value would show a second
    time. So displaying this one shows its PNG and closes it in pyplot, which
    takes it out of that end-of-cell flush. Draw everything before displaying.
    """

    def _ipython_display_(self):
        from IPython.display import display

        png, alt = _png_and_alt(self)
        display({"image/png": png}, raw=True, metadata={"image/png": {"alt": alt}})
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
                  cmap="Reds", *, mask=None, share_scale=True, vmax=None, vmin=None,
                  colorbar_label=None, upright_labels=None, gamma=None,
                  colorbar_shrink=0.6, colorbar_aspect=20, colorbar=True, alt=None):
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
            False are drawn light grey with diagonal lines, so a masked key
            never looks like a small weight (by pattern, not only by colour),
            and they do not count for the colour range.
        share_scale: True (default): one colour scale and one colour bar for
            all panels, so equal colours mean equal values. False: each panel
            gets its own scale and colour bar, so panels with small values
            still show their pattern.
        vmax: top of the colour scale for every panel (default: the largest
            shown value). Frames of an interactive figure that should be
            compared share one, e.g. ``vmax=1`` for attention weights.
        vmin: bottom of the colour scale for every panel (default: 0 when
            every shown value is >= 0, else the smallest shown value), e.g.
            ``vmin=-1, vmax=1`` for a matrix of cosines.
        colorbar_label: text beside every colour bar, e.g. '注意力权重'
            (default: none).
        upright_labels: True writes the y label level, left of the panels,
            and each colour bar's label level, above the bar, so short
            Chinese labels ('查询', '权重') are not read sideways. Default
            (None): True when the y label or the colour-bar label is Chinese,
            False otherwise (the book's rotated English labels).
        gamma: None (default) for a linear colour scale. A number in (0, 1]
            stretches it by a power (``matplotlib.colors.PowerNorm``): with
            0.5, colour follows the square root of the value, so a pale band
            of small weights next to a few large ones is still seen. Say so
            in ``colorbar_label``.
        colorbar_shrink, colorbar_aspect: the colour bar's length as a share
            of the panels' height, and its length over its width (matplotlib's
            ``shrink`` and ``aspect``; the defaults draw the bar the book
            draws). A single wide panel reads better with a longer, wider
            bar, e.g. 0.9 and 10.
        colorbar: False draws no colour bar, e.g. when the weights are
            written in the cells.
        alt: the figure's text alternative. Default: built when the figure is
            shown, from the shape, the axis labels (and token tick labels)
            and where the largest values lie, e.g. '热力图：10 个查询 ×
            10 个键，权重集中在对角线上。色标从 0 到 0.93。'

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
    if upright_labels is None:
        upright_labels = _has_cjk(f"{ylabel or ''}{colorbar_label or ''}")
    cmap = matplotlib.colormaps.get_cmap(cmap).with_extremes(bad="lightgrey")  # masked cells
    fig, axes = plt.subplots(num_rows, num_cols, figsize=figsize, sharex=True,
                             sharey=True, squeeze=False,
                             FigureClass=_ShownOnceFigure)
    # The book's colour bar described only the last panel; a shared scale
    # makes equal colours mean equal weights across panels.
    top, bottom = vmax, vmin
    if top is not None and bottom is not None and not bottom < top:
        raise ValueError(f"expected vmin < vmax, got vmin={bottom} and vmax={top}")
    if gamma is not None and not 0 < gamma <= 1:
        raise ValueError(f"expected gamma in (0, 1] (0.5 = square-root colour scale), got {gamma}")
    if not 0 < colorbar_shrink <= 1:
        raise ValueError(f"expected colorbar_shrink in (0, 1], got {colorbar_shrink}")
    if not colorbar_aspect > 0:
        raise ValueError(f"expected colorbar_aspect > 0, got {colorbar_aspect}")
    bar = dict(shrink=colorbar_shrink, aspect=colorbar_aspect)
    vmin, vmax = _colour_range(matrices[keep])
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            if not share_scale:
                vmin, vmax = _colour_range(matrices[i, j][keep[i, j]])
            vmax = vmax if top is None else top
            vmin = vmin if bottom is None else bottom
            shown = np.ma.masked_array(matrices[i, j].numpy(),
                                       mask=~keep[i, j].numpy())
            if gamma is None:
                image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax)
            else:
                norm = matplotlib.colors.PowerNorm(gamma, vmin=vmin, vmax=vmax)
                image = ax.imshow(shown, cmap=cmap, norm=norm)
            if not keep[i, j].all():
                _hatch(ax, ~keep[i, j])
            if colorbar and not share_scale:
                _label_colorbar(fig.colorbar(image, ax=ax, **bar), colorbar_label, upright_labels)
            if i == num_rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel, **(dict(rotation=0, ha="right", va="center") if upright_labels else {}))
            if titles is not None:
                ax.set_title(titles[j])
    if colorbar and share_scale:
        _label_colorbar(fig.colorbar(image, ax=axes, **bar), colorbar_label, upright_labels)
    low, high = _colour_range(matrices[keep])
    low, high = (low if bottom is None else bottom), (high if top is None else top)
    fig._au_heatmaps = {"matrices": matrices, "keep": keep, "xlabel": xlabel, "ylabel": ylabel,
                        "gamma": gamma,
                        "scale": (low, high) if share_scale else None}  # for _heatmaps_alt
    fig._au_alt = alt
    return fig


def _has_cjk(text):
    """Whether text holds a CJK ideograph (a Chinese label reads badly rotated)."""
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _label_colorbar(colorbar, label, upright):
    """Beside the bar, or level above it (clear of its top tick), starting at
    the bar's left edge so a long label runs over the tick labels, not the panels."""
    if label and upright:
        colorbar.ax.set_title(label, pad=14, loc="left")
    elif label:
        colorbar.set_label(label)


def _hatch(ax, masked):
    """Diagonal lines over the masked cells (masked: (L, S) bool) of a heatmap."""
    from matplotlib.collections import PatchCollection

    cells = [matplotlib.patches.Rectangle((j - 0.5, i - 0.5), 1, 1)
             for i, j in masked.nonzero().tolist()]
    ax.add_collection(PatchCollection(cells, facecolor="none", edgecolor="#555555",
                                      linewidth=0, hatch="///"), autolim=False)


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"),
         figsize=(3.5, 2.5), axes=None, alt=None):
    """Plot curves, as ``d2l.plot`` does, and return the Figure.

    Args:
        X: x values (k,), shared by every curve, or a list with one per curve.
        Y: one curve (k,), a list of curves, or a 2-D tensor of curves (rows);
            None plots X's curves against their indices 0, 1, ..., as the book.
        axes: draw into these matplotlib Axes instead of a new figure.
        alt: the figure's text alternative. Default: built when the figure is
            shown, from its titles, axis labels and ranges, and legend, e.g.
            '曲线、散点图：横轴 x（0 到 5），纵轴 y（-1 到 5）；图例：真实函数、预测'.

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
    if alt is not None:
        axes.figure._au_alt = alt
    return axes.figure


def show_source(obj, docstring=False, checks=False, comments=False, *, start=None,
                stop=None):
    """Syntax-highlighted source of a function, class or method, for a slide.

    Decks put implementations on slides with this instead of copying them, so
    a slide always shows the code that actually runs. A slide shows the idea:
    the docstring, the input checks (``_check_*(...)`` calls, ``if ...: raise``
    guards and loops that only check) and whole-line comments are left out
    unless asked for; comments at the end of a line (the shapes) stay. What is
    left is the code exactly as it runs once the input is valid.

    start, stop: show only the lines from the first one that begins (after its
    indent) with ``start`` to the next one that begins with ``stop``, both
    included, e.g. the lines of ``__init__`` that compute a table, without the
    bookkeeping around them. The excerpt is dedented.
    """
    from IPython.display import Code  # only the decks need IPython

    if start is not None or stop is not None:
        return Code(_excerpt(show_source(obj, docstring, checks, comments).data,
                             start, stop, obj), language="python")
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


def _excerpt(text, start, stop, obj):
    """The lines of text from the one beginning with start to the next one
    beginning with stop (None: the first / the last line), dedented."""
    lines = text.splitlines()
    name = getattr(obj, "__qualname__", repr(obj))

    def find(prefix, begin):
        for i in range(begin, len(lines)):
            if lines[i].lstrip().startswith(prefix):
                return i
        raise ValueError(f"expected a line of {name} beginning with {prefix!r} "
                         f"(after line {begin + 1} of the shown source), found none")

    first = 0 if start is None else find(start, 0)
    last = len(lines) - 1 if stop is None else find(stop, first)
    return textwrap.dedent("\n".join(lines[first:last + 1]))


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

    def __init__(self, names, sliders, frames, alts):
        self.names, self.sliders, self.frames = names, sliders, frames
        self.alts = alts                               # each frame's text alternative
        self._widget = None

    def _frame_index(self, indices):                  # row-major over the sliders
        flat = 0
        for slider, i in zip(self.sliders, indices):
            flat = flat * len(slider.values) + i
        return flat

    def _default(self):
        return self._frame_index([s.index for s in self.sliders])

    def _settings(self, indices, separator=" · "):
        """'有效长度 = 3 · d = 8': the setting of the frame at these slider indices."""
        return separator.join(f"{s.description or n} = {s.labels[i]}"
                              for n, s, i in zip(self.names, self.sliders, indices))

    def _frame_alts(self):
        """Every frame's text alternative, led by its setting, in frame order."""
        settings = itertools.product(*(range(len(s.values)) for s in self.sliders))
        return [f"{self._settings(indices, '，')}。{alt}" for indices, alt in zip(settings, self.alts)]

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
        alts = self._frame_alts()
        captions = html.escape(self._settings([s.index for s in self.sliders]))
        spec = {"controls": [{"label": s.description or n, "labels": s.labels, "index": s.index}
                             for n, s in zip(self.names, self.sliders)],
                "frames": uris, "alts": alts}
        # '</' would end the JSON script early; JSON allows the escaped form.
        data = json.dumps(spec, ensure_ascii=False).replace("</", "<\\/")
        # The status line is for screen readers: it says each new setting.
        return (f'<div class="au-interactive">\n'
                f'<div class="au-controls">{captions}</div>\n'
                f'<p class="au-status" aria-live="polite" style="{_VISUALLY_HIDDEN}"></p>\n'
                f'<img class="au-frame" alt="{html.escape(alts[self._default()])}" '
                f'src="{uris[self._default()]}">\n'
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


# Offline controls: build one labelled range input per slider and swap the
# frame and its text alternative. Plain ES5, no libraries. The visible label
# wraps the input (its accessible name); aria-valuetext says the value, not
# the index; the status line announces each new setting. reveal.js leaves the
# arrow keys to a focused input, so the input gives focus back when the
# pointer is released.
_INTERACTIVE_JS = """(function () {
  var root = document.currentScript && document.currentScript.parentNode;
  if (!root || root.getAttribute('data-ready')) return;
  root.setAttribute('data-ready', '1');
  var spec = JSON.parse(root.querySelector('script.au-frames').textContent);
  var img = root.querySelector('img.au-frame'), box = root.querySelector('.au-controls');
  var status = root.querySelector('.au-status');
  var inputs = [];
  box.textContent = '';
  function show(announce) {
    var flat = 0, said = [];
    spec.controls.forEach(function (c, k) {
      var i = +inputs[k].value;
      flat = flat * c.labels.length + i;
      inputs[k].nextSibling.textContent = ' ' + c.labels[i];
      inputs[k].setAttribute('aria-valuetext', c.labels[i]);
      said.push(c.label + ' = ' + c.labels[i]);
    });
    img.src = spec.frames[flat];
    img.alt = spec.alts[flat];
    if (announce) status.textContent = said.join('，');
  }
  spec.controls.forEach(function (c) {
    var row = document.createElement('label'), input = document.createElement('input');
    row.className = 'au-control';
    row.appendChild(document.createTextNode(c.label + ' '));
    input.type = 'range'; input.min = 0; input.max = c.labels.length - 1; input.step = 1;
    input.value = c.index;
    input.addEventListener('input', function () { show(true); });
    input.addEventListener('pointerup', function () { input.blur(); });
    row.appendChild(input);
    row.appendChild(document.createElement('output'));
    box.appendChild(row);
    inputs.push(input);
  });
  show(false);
})();"""
_VISUALLY_HIDDEN = ("position:absolute;width:1px;height:1px;margin:-1px;padding:0;border:0;"
                    "overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap")


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
    frames, alts = [], []
    for indices in itertools.product(*(range(len(s.values)) for s in sliders)):
        fig = draw(**{n: s.values[i] for n, s, i in zip(names, sliders, indices)})
        fig = plt.gcf() if fig is None else fig
        png, alt = _png_and_alt(fig, tight=False)
        frames.append(png)
        alts.append(alt)
        plt.close(fig)                 # shown as a frame, never by the inline flush
    return _InteractiveFigure(names, sliders, frames, alts)


# --------------------------------------------------------------------------
# Concept questions
# --------------------------------------------------------------------------
# ``au.quiz(question, options, answer)`` shows one multiple-choice question
# whose every option explains itself once chosen, right or wrong, in the
# three places a deck is used (as au.interactive does):
#   * live (a kernel): ipywidgets buttons, and the explanation below them;
#   * offline HTML (no kernel, no network): the same buttons in the stored
#     text/html, made to work by a few lines of JavaScript;
#   * a plain notebook viewer (no scripts): the question and the options,
#     and nothing else: the answer and the explanations are only in a
#     base64 JSON payload that such a viewer never shows.
# Element ids come from the question's text, so the stored HTML is the same
# on every run (strict nbval compares it).

class _Quiz:
    """What `quiz` returns; Jupyter displays it through its MIME bundle."""

    def __init__(self, question, options, answer):
        self.question, self.options, self.answer = question, options, answer
        digest = hashlib.sha1(json.dumps([question, options]).encode("utf-8")).hexdigest()
        self.id = "au-quiz-" + digest[:10]
        self._widget = None

    def _letter(self, i):
        return "ABCDEFGHIJ"[i]

    def _feedback(self, i):
        """The verdict on option i, in words (never in colour alone)."""
        verdict = "✓ 正确。" if i == self.answer else "✗ 不对。"
        return verdict + self.options[i][1]

    def _text(self):
        lines = [f"选择题：{self.question}"]
        lines += [f"  {self._letter(i)}. {text}" for i, (text, _) in enumerate(self.options)]
        lines.append("（在 JupyterLab 中运行本单元，或在离线幻灯片中点一个选项，就能看到它的解释。）")
        return "\n".join(lines)

    def _html(self):
        import base64

        # ASCII JSON (\\u escapes), so the page's atob() gives text JSON.parse reads.
        key = {"answer": self.answer, "explanations": [self._feedback(i) for i in range(len(self.options))]}
        payload = base64.b64encode(json.dumps(key).encode("ascii")).decode("ascii")
        buttons = "\n".join(
            f'<button type="button" class="au-quiz-option" aria-pressed="false">'
            f'{self._letter(i)}. {html.escape(text)}</button>'
            for i, (text, _) in enumerate(self.options))
        return (f'<div class="au-quiz" id="{self.id}" lang="zh-CN">\n<style>{_QUIZ_CSS}</style>\n'
                f'<p class="au-quiz-question" id="{self.id}-q"><strong>选择题</strong> '
                f'{html.escape(self.question)}</p>\n'
                f'<div class="au-quiz-options" role="group" aria-labelledby="{self.id}-q">\n{buttons}\n</div>\n'
                f'<p class="au-quiz-feedback" role="status" aria-live="polite"></p>\n'
                f'<p class="au-quiz-hint">运行本单元（或打开离线幻灯片）后，点一个选项就能看到它的解释。</p>\n'
                f'<script type="application/json" class="au-quiz-key">{payload}</script>\n'
                f'<script>{_QUIZ_JS}</script>\n</div>')

    def _live_widget(self):
        import ipywidgets as widgets

        feedback = widgets.HTMLMath(value="")
        buttons = [widgets.Button(description=f"{self._letter(i)}. {text}", tooltip=text,
                                  layout=widgets.Layout(width="auto", max_width="100%", height="auto"))
                   for i, (text, _) in enumerate(self.options)]

        def choose(button):
            i = buttons.index(button)
            for other in buttons:
                other.button_style = ""
                other.icon = ""
            button.button_style = "success" if i == self.answer else "danger"
            button.icon = "check" if i == self.answer else "times"
            feedback.value = html.escape(self._feedback(i))

        for button in buttons:
            button.on_click(choose)
        question = widgets.HTMLMath(value=f"<b>选择题</b> {html.escape(self.question)}")
        style = widgets.HTML(value=f"<style>{_QUIZ_LIVE_CSS}</style>")
        box = widgets.VBox([style, question, *buttons, feedback])
        box.add_class("au-quiz-live")
        return box

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": self._text(), "text/html": self._html()}
        try:
            if self._widget is None:
                self._widget = self._live_widget()
            bundle["application/vnd.jupyter.widget-view+json"] = {
                "version_major": 2, "version_minor": 0, "model_id": self._widget.model_id}
        except ImportError:  # no ipywidgets: the HTML buttons still work
            pass
        return bundle


# Plain colours with AA contrast on white; right and wrong are also said in
# words ("正确" / "不对") and marked by a thick border, not by colour alone.
_QUIZ_CSS = (
    ".au-quiz{margin:.4em 0;text-align:left}"
    ".au-quiz .au-quiz-question{margin:.2em 0 .5em}"
    ".au-quiz .au-quiz-options{display:flex;flex-direction:column;gap:.35em;align-items:stretch}"
    ".au-quiz .au-quiz-option{font:inherit;text-align:left;padding:.3em .7em;color:#1a1a1a;"
    "background:#fff;border:2px solid #5b6470;border-radius:6px;cursor:pointer}"
    ".au-quiz .au-quiz-option:focus-visible{outline:3px solid #1f5fa8;outline-offset:2px}"
    ".au-quiz .au-quiz-option[aria-pressed=true]{border-width:4px;background:#f2f5f9}"
    ".au-quiz .au-quiz-right{border-color:#1b6e20;color:#1b6e20}"
    ".au-quiz .au-quiz-wrong{border-color:#a51d1d;color:#a51d1d}"
    ".au-quiz .au-quiz-option.au-quiz-right,.au-quiz .au-quiz-option.au-quiz-wrong{color:#1a1a1a}"
    ".au-quiz .au-quiz-feedback{min-height:1.4em;margin:.5em 0 0}"
    ".au-quiz .au-quiz-hint{color:#4a4f57;font-size:.8em;margin:.3em 0 0}")
_QUIZ_LIVE_CSS = (".au-quiz-live .widget-button{white-space:normal;text-align:left;"
                  "height:auto;line-height:1.4;padding:4px 10px}")

# Offline: make the buttons work. Plain ES5, no libraries. A focused button
# keeps Space and Enter for itself (reveal.js would turn the page instead).
_QUIZ_JS = """(function () {
  var root = document.currentScript && document.currentScript.parentNode;
  if (!root || root.getAttribute('data-ready')) return;
  root.setAttribute('data-ready', '1');
  var key = JSON.parse(atob(root.querySelector('script.au-quiz-key').textContent));
  var buttons = root.querySelectorAll('button.au-quiz-option');
  var feedback = root.querySelector('.au-quiz-feedback');
  root.querySelector('.au-quiz-hint').textContent = '点一个选项，看它为什么对、为什么不对。';
  Array.prototype.forEach.call(buttons, function (button, i) {
    button.addEventListener('keydown', function (event) {
      if (event.key === ' ' || event.key === 'Enter') event.stopPropagation();
    });
    button.addEventListener('click', function () {
      var verdict = i === key.answer ? 'au-quiz-right' : 'au-quiz-wrong';
      Array.prototype.forEach.call(buttons, function (other) {
        other.className = 'au-quiz-option';
        other.setAttribute('aria-pressed', 'false');
      });
      button.className = 'au-quiz-option ' + verdict;
      button.setAttribute('aria-pressed', 'true');
      feedback.className = 'au-quiz-feedback ' + verdict;
      feedback.textContent = key.explanations[i];
      if (window.MathJax && MathJax.Hub) MathJax.Hub.Queue(['Typeset', MathJax.Hub, feedback]);
    });
  });
})();"""


def quiz(question, options, answer):
    """A multiple-choice question whose every option explains itself once chosen.

    It works live in JupyterLab (buttons), in the offline slides (the same
    buttons in the stored HTML, no kernel, no network), and reads as plain
    text in a notebook viewer without giving the answer away. End the cell
    with the call. A deck keeps its questions in a JSON file and shows them
    with ``load_quizzes``, so that a notebook viewer, which shows every cell's
    source, never shows the answers.

    Args:
        question: the question (Chinese; $...$ math is typeset live and offline).
        options: a list of ``(text, explanation)`` pairs, 2 to 6 of them. The
            text is plain (write √d, not $\\sqrt{d}$); the explanation says
            why this option is right or wrong.
        answer: the index of the right option (0 for the first).

    Example::

        au.quiz("缩放点积注意力为什么除以 √d，而不是 d？", [
            ("让 q·k 的方差回到 1", "q·k 是 d 个独立乘积之和，方差为 d；除以 √d 方差变回 1。"),
            ("除以 d 会溢出", "除以 d 不会溢出；问题是分数被压得太小，softmax 变得接近均匀。"),
        ], answer=0)
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"expected question to be a non-empty str, got {question!r}")
    options = list(options)
    if not 2 <= len(options) <= 6:
        raise ValueError(f"expected 2 to 6 options, got {len(options)}")
    for i, option in enumerate(options):
        if not (isinstance(option, (tuple, list)) and len(option) == 2
                and all(isinstance(part, str) and part.strip() for part in option)):
            raise ValueError(f"expected option {i} to be a (text, explanation) pair of non-empty "
                             f"str, got {option!r}")
    if not (isinstance(answer, int) and 0 <= answer < len(options)):
        raise ValueError(f"expected answer to be the index of the right option, 0 to "
                         f"{len(options) - 1}, got {answer!r}")
    return _Quiz(question, [tuple(option) for option in options], answer)


def load_quizzes(path):
    """A deck's concept questions, read from a JSON file, by name.

    The questions of a deck live beside it (``notebooks/quizzes/<deck>.json``),
    not in its cells: a notebook viewer shows a cell's source, and the source
    of an ``au.quiz(...)`` call holds the answer and the explanations. A deck
    loads them in its set-up cell and shows one per cell::

        quizzes = au.load_quizzes("quizzes/05_self_attention_and_positional_encoding.json")
        ...
        quizzes["why-sqrt-d"]

    The file maps each name to ``{"question": ..., "options": [[text,
    explanation], ...], "answer": index}``, the arguments of ``quiz``.

    Returns:
        A dict from name to the quiz, in the file's order.
    """
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"expected {path} to hold a JSON object of named questions, "
                         f"got {type(entries).__name__}")
    quizzes = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict) or set(entry) != {"question", "options", "answer"}:
            raise ValueError(f"expected question {name!r} in {path} to have exactly the keys "
                             f"question, options, answer, got {entry!r:.80}")
        quizzes[name] = quiz(entry["question"], [tuple(o) for o in entry["options"]], entry["answer"])
    return quizzes


# --------------------------------------------------------------------------
# Self-check exercises
# --------------------------------------------------------------------------
# A student writes a function in a stub cell and checks it with
# ``au.check_<name>(their_function)``. The checker runs it on small seeded
# inputs, property by property: shapes first, then one probe per mistake
# students are known to make (the book's own defects among them), then
# values against this module and, where one exists, PyTorch's built-in. The
# first property that fails is printed, named as the mistake, with the input
# that shows it and a hint; when all pass, it prints what was verified.
#
# Most probes work by comparison: the output a known mistake would give on
# the probe's input is computed here too, and a wrong answer that matches it
# is named. Every probe's input is chosen so that the known mistakes give
# different outputs (tests/test_exercises.py proves it, one wrong
# implementation per diagnosis).

CHECK_TOLERANCE = 1e-5      # absolute and relative, float32 against the module
_TOLERANCE_TEXT = "1e-5 + 1e-5 × |参考值|"  # assert_close's rule with atol = rtol = 1e-5


class _CheckResult:
    """What ``check_<name>`` found; the printed verdict is what a student reads.

    ``code`` is "passed", "not-implemented", "raised" or the diagnosis of the
    mistake (stable, for tests). ``bool(result)`` is True when the check
    passed, so a solution cell can ``assert au.check_softmax(softmax)``.
    Jupyter shows nothing for it: the verdict was printed already.
    """

    def __init__(self, name, code):
        self.name, self.code = name, code

    @property
    def passed(self):
        return self.code == "passed"

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return f"CheckResult({self.name!r}, code={self.code!r})"

    def _ipython_display_(self):
        pass                                # the verdict is the output


class _Mistake(Exception):
    """The first failing property: its diagnosis code, the mistake named in
    Chinese, the input that shows it, what came out, what should have, and
    a hint toward the idea."""

    def __init__(self, code, title, example=None, got=None, expected=None, hint=None,
                 labels=("你的结果", "正确结果"), error=None):
        super().__init__(code)
        self.code, self.title, self.example = code, title, example
        self.got, self.expected, self.hint, self.labels = got, expected, hint, labels
        self.error = error                  # the student's exception, when it shows the mistake


class _StudentRaised(Exception):
    """The student's function raised ``error`` on the input ``example``."""

    def __init__(self, error, example, function_name):
        super().__init__(str(error))
        self.error, self.example, self.function_name = error, example, function_name


# A known mistake: its diagnosis and the output it gives on a probe's input.
_Known = collections.namedtuple("_Known", "code title output hint")


def _run_checker(name, student, steps, verified, extra=()):
    """Run ``steps(student, *extra)``, print the verdict, return a _CheckResult.

    ``verified``: the lines printed when every step passes (a list, or a
    function of what the steps returned).
    """
    for function in (student, *extra):
        if not callable(function):
            raise ValueError(f"expected your function (a callable) for check_{name}, "
                             f"got {type(function).__name__}")
    dtype = torch.get_default_dtype()      # a deck may compute in float64; the probes are float32
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # the deck's random stream stays as it was
            torch.set_default_dtype(torch.float32)
            torch.manual_seed(0)
            found = steps(student, *extra)
    except _Mistake as mistake:
        print(_failed_text(name, mistake, student))
        return _CheckResult(name, mistake.code)
    except _StudentRaised as raised:
        if isinstance(raised.error, NotImplementedError):
            print(f"尚未实现：请先补全 {raised.function_name}，再运行本单元。")
            return _CheckResult(name, "not-implemented")
        print(_raised_text(name, raised, student))
        return _CheckResult(name, "raised")
    finally:
        torch.set_default_dtype(dtype)
    lines = verified(found) if callable(verified) else verified
    print(f"✓ {name}：通过。已验证：\n" + "\n".join(f"  · {line}" for line in lines))
    return _CheckResult(name, "passed")


def _failed_text(name, mistake, student):
    lines = [f"✗ {name}：未通过。", f"错在：{mistake.title}"]
    if mistake.example:
        lines.append(f"例子：{mistake.example}")
    if mistake.error is not None:
        lines += _error_lines(mistake.error, student)
    if mistake.got is not None:
        lines.append(f"  {mistake.labels[0]}：{_fmt(mistake.got)}")
    if mistake.expected is not None:
        lines.append(f"  {mistake.labels[1]}：{_fmt(mistake.expected)}")
    if mistake.hint:
        lines.append(f"提示：{mistake.hint}")
    return "\n".join(lines)


def _raised_text(name, raised, student):
    lines = [f"✗ {name}：运行出错。", f"输入：{raised.example}"]
    lines += _error_lines(raised.error, student)
    lines.append("提示：先让函数在这个输入上跑通（核对每一步的形状），再运行本单元。")
    return "\n".join(lines)


def _error_lines(error, student):
    """The student's line that raised, and the error in one line."""
    where = _student_line(error, student)
    lines = [] if where is None else [f"出错的是你的代码第 {where[0]} 行：{where[1]}"]
    return lines + [f"  {_short_error(error)}"]


def _short_error(error):
    """'TypeName: first line of the message', at most about 150 characters."""
    message = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: " + (message if len(message) <= 130 else message[:127] + "...")


def _student_line(error, student):
    """(line number, text) of the deepest traceback frame in the student's own
    code (the file or notebook cell that defines ``student``), or None."""
    import traceback

    code = getattr(student, "__code__", None)
    frames = traceback.extract_tb(error.__traceback__)
    if code is not None:
        own = [f for f in frames if f.filename == code.co_filename]
    else:                                   # e.g. functools.partial: any frame outside libraries
        own = [f for f in frames if f.filename != __file__ and "site-packages" not in f.filename]
    if not own:
        return None
    return own[-1].lineno, (own[-1].line or "").strip()


def _call(student, *args, example, name, copy=True):
    """``student(*args)``, on copies of the tensors unless ``copy=False``; an
    exception in the student's code becomes _StudentRaised, named after the
    student's function (a deck's stub may be called my_masked_softmax), or
    after ``name`` when it has no name of its own (a lambda)."""
    if copy:
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        return student(*args)
    except Exception as error:              # the student's bug, shown briefly
        own = getattr(student, "__name__", "")
        raise _StudentRaised(error, example, own if own.isidentifier() else name) from None


def _as_tensor(got, example, expected_text="一个张量"):
    """The student's return value as a detached CPU tensor, or a _Mistake."""
    if got is None:
        raise _Mistake("returned-none", "函数没有返回任何东西（忘了 return？）", example,
                       hint=f"函数最后应当 return {expected_text}。")
    if isinstance(got, (tuple, list)) and got and isinstance(got[0], torch.Tensor):
        raise _Mistake("returned-tuple", f"函数返回了 {len(got)} 个值组成的元组，应当只返回{expected_text}",
                       example, hint="只 return 要求的那一个结果。")
    try:
        return torch.as_tensor(got).detach().cpu()
    except (TypeError, ValueError, RuntimeError):
        raise _Mistake("not-a-tensor", f"返回值的类型是 {type(got).__name__}，不是张量", example,
                       hint=f"函数应当 return {expected_text}。") from None


def _close(a, b, tol=CHECK_TOLERANCE):
    return (a.shape == b.shape and a.dtype != torch.bool and b.dtype != torch.bool
            and torch.allclose(a.double(), b.double(), rtol=tol, atol=tol))


def _compare(got, expected, example, known=(), hint=None, tol=CHECK_TOLERANCE):
    """Pass if ``got`` matches ``expected``; else raise the first known mistake
    whose output it matches, a wrong shape, or wrong values."""
    got = _as_tensor(got, example)
    expected = expected.detach().cpu()
    if _close(got, expected, tol):
        return got
    for mistake in known:
        if _close(got, mistake.output.detach().cpu(), tol):
            raise _Mistake(mistake.code, mistake.title, example, got, expected, mistake.hint)
    if got.shape != expected.shape:
        raise _Mistake("wrong-shape", f"形状不对：应为 {tuple(expected.shape)}，"
                       f"你的结果是 {tuple(got.shape)}", example,
                       hint=hint or "逐行打印中间结果的形状（.shape），找出哪一步变了样。")
    if not torch.isfinite(got.double()).all():
        raise _Mistake("not-finite", "结果里有 NaN 或 inf", example, got, expected,
                       hint="找出哪一步第一次出现 NaN 或 inf：常见的是 exp 溢出，或 0/0。")
    raise _Mistake("wrong-values", "形状对了，但数值不对", example, got, expected,
                   hint=hint or "在这个小例子上手算一遍，与你的中间结果逐步对照。")


def _fmt(t, digits=3):
    """A short, deterministic text of a small tensor (rounded, no dtype)."""
    t = torch.as_tensor(t).detach().cpu()
    if t.numel() > 36:
        return f"形状 {tuple(t.shape)} 的张量"
    if t.dtype == torch.bool:
        return f"{t.int().tolist()}（1 为 True）"

    def number(x):
        if isinstance(x, list):
            return "[" + ", ".join(number(v) for v in x) + "]"
        if math.isnan(x) or math.isinf(x):
            return str(x)
        x = round(x, digits) + 0.0          # + 0.0: no "-0"
        return f"{x:.{places}f}"

    # One number of decimals for the whole tensor (0.090, 0.245, not 0.09, 0.245): the
    # fewest that show every entry as rounded to `digits`.
    values = [v for v in t.double().flatten().tolist() if math.isfinite(v)]
    places = next((k for k in range(digits + 1)
                   if all(abs(round(v, digits) - round(v, k)) < 1e-12 for v in values)), digits)
    return number(t.double().tolist())


def _tensor(values):
    """A float32 tensor from nested lists (the probes' inputs, written out)."""
    return torch.tensor(values, dtype=torch.float32)


def _seeded(*shape, seed=0):
    """Standard-normal numbers that are the same on every run and machine."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _check_unchanged(before, after, example, hint):
    """A function must never write into a tensor it was given."""
    if not torch.equal(before, after):
        raise _Mistake("modifies-input", "改写了调用者传入的张量", example, after, before,
                       hint, labels=("调用后它变成", "调用前它是"))


# ---- Deck 01: attention pooling and softmax -------------------------------

def _pooling_reference(query, keys, values):
    """The module's attention pooling of one query: masked_softmax, then a weighted sum."""
    weights = masked_softmax((keys @ query)[None, None])[0, 0]  # (S, E) @ (E,) -> (S,)
    return weights @ values                                    # (S,) @ (S,) or (S, Ev)


def check_attention_pooling(attention_pooling):
    """Check ``attention_pooling(query, keys, values)`` and print a verdict.

    The student's function pools one query: scores ``keys @ query`` (no
    scaling, as in deck 01), softmax over the S keys, then the weighted sum
    of the values. query (E,), keys (S, E), values (S,) or (S, Ev) ->
    a number (shape ()) or (Ev,). Compared with the module's
    ``masked_softmax`` and with ``F.scaled_dot_product_attention(scale=1)``.
    """
    return _run_checker("attention_pooling", attention_pooling, _attention_pooling_steps, [
        "形状：values 为 (S,) 时输出一个数，为 (S, Ev) 时输出 (Ev,)；S 与 E 相等或不等都试过",
        f"数值：与 au.masked_softmax 的汇聚、F.scaled_dot_product_attention(scale=1) 一致（误差 ≤ {_TOLERANCE_TEXT}）",
        "权重由查询与键的点积经 softmax 得到，输出是值的加权和（不是键、不是平均）",
        "分数上千时不溢出（没有 NaN）"])


def _attention_pooling_steps(student):
    name = "attention_pooling"
    query, keys = _tensor([1., 2.]), _tensor([[1., 0.], [1., 1.]])  # scores keys @ query = [1, 3]
    values = _tensor([1., 5.])
    scores = keys @ query
    example = f"query = {_fmt(query)}，keys = {_fmt(keys)}，values = {_fmt(values)}"
    got = _call(student, query, keys, values, example=example, name=name)
    _compare(got, _pooling_reference(query, keys, values), example, known=[
        _Known("returns-weights", "返回的是注意力权重，不是汇聚的输出", F.softmax(scores, dim=0),
               "权重只是中间结果：最后还要用它对值加权求和，weights @ values。"),
        _Known("no-softmax", "没有做 softmax：直接把分数当成了权重", scores @ values,
               "分数可正可负、和也不为 1；先用 softmax 把它们变成和为 1 的权重。"),
        _Known("not-normalised", "做了 exp 但没有归一化：权重的和不是 1", scores.exp() @ values,
               "softmax 是 exp(分数) 再除以它们的和。"),
        _Known("plain-average", "输出是值的平均，与查询无关", values.mean(dim=0),
               "每个值的权重应取决于查询与它的键有多相似：softmax(keys @ query)。"),
        _Known("keys-not-transposed", "分数算成了 query @ keys（键没有转置，乘错了维）",
               F.softmax(query @ keys, dim=0) @ values,
               "每个键与查询做点积：keys @ query，即 (S, E) @ (E,) -> (S,)。"),
        _Known("keys-as-values", "加权求和用的是键，不是值", F.softmax(scores, dim=0) @ keys,
               "键只用来算权重；汇聚的是值：weights @ values。"),
    ])
    values = _tensor([[1., 0.], [0., 2.]])                     # (S, Ev) with Ev = E
    example = f"query = {_fmt(query)}，keys = {_fmt(keys)}，values = {_fmt(values)}"
    got = _call(student, query, keys, values, example=example, name=name)
    _compare(got, _pooling_reference(query, keys, values), example)
    query, keys, values = _seeded(3, seed=1), _seeded(5, 3, seed=2), _seeded(5, 4, seed=3)
    example = "query (3,)、keys (5, 3)、values (5, 4)（固定种子的随机数）"
    got = _call(student, query, keys, values, example=example, name=name)
    got = _compare(got, _pooling_reference(query, keys, values), example)
    builtin = F.scaled_dot_product_attention(query[None, None], keys[None], values[None], scale=1.0)[0, 0]
    _compare_builtin(got, builtin, example, "F.scaled_dot_product_attention(..., scale=1)")
    query, keys, values = _tensor([100., 0.]), _tensor([[10., 0.], [9., 0.]]), _tensor([1., 5.])
    example = f"query = {_fmt(query)}，keys = {_fmt(keys)}（分数 1000 与 900），values = {_fmt(values)}"
    got = _as_tensor(_call(student, query, keys, values, example=example, name=name), example)
    if not torch.isfinite(got).all():
        raise _Mistake("overflow", "分数很大时溢出：exp(1000) = inf，inf / inf 得到 NaN", example, got,
                       _pooling_reference(query, keys, values),
                       "用 F.softmax，或先减去分数的最大值再取 exp（softmax 的结果不变）。")
    _compare(got, _pooling_reference(query, keys, values), example)


def _compare_builtin(got, builtin, example, builtin_name):
    """The student matched the module; PyTorch's built-in must agree as well."""
    if not _close(got, builtin):
        raise _Mistake("differs-from-pytorch", f"与本模块一致，但与 PyTorch 的 {builtin_name} 不一致",
                       example, got, builtin,
                       "你是否改过 attention_utils.py？检查器以它为准，再对照 PyTorch。")


def check_softmax(softmax):
    """Check ``softmax(scores)`` over the last axis and print a verdict.

    scores (..., S) -> weights of the same shape, each row summing to 1.
    Checked: the axis (2-D and 3-D input), normalisation, numerical
    stability (scores of 1000, rows far apart), -inf scores (weight 0),
    that the input is left untouched, and values against ``F.softmax``.
    A row of only -inf scores is 0/0: either NaN (as ``F.softmax``) or all
    zeros (as ``au.masked_softmax`` gives a row with valid length 0) passes,
    and the verdict says which one the function gives.
    """
    return _run_checker("softmax", softmax, _softmax_steps, lambda all_masked: [
        "形状：(S,)、(L, S)、(B, L, S) 的输入都保持原形状，softmax 做在最后一维",
        f"数值：与 F.softmax(dim=-1) 一致（误差 ≤ {_TOLERANCE_TEXT}）",
        "数值稳定：分数为 1000，或两行相差 1000 时，都没有溢出成 NaN",
        f"分数为 -inf 的位置权重为 0；全为 -inf 的一行{all_masked}",
        "没有改动传入的张量"])


def _softmax_steps(student):
    name = "softmax"
    x = _tensor([[1., 2., 3.], [1., 1., 4.]])
    example = f"scores = {_fmt(x)}"
    _compare(_call(student, x, example=example, name=name), F.softmax(x, dim=-1), example, known=[
        _Known("wrong-axis", "softmax 做在了第 0 维：每一列的和为 1，而不是每一行", F.softmax(x, dim=0),
               "每个查询（每一行）在它的 S 个键上归一化：dim=-1。"),
        _Known("not-normalised", "没有归一化：结果是 exp(分数)，每行的和不是 1", x.exp(),
               "把 exp(分数) 除以同一行的和（sum(dim=-1, keepdim=True)）。"),
        _Known("global-normalisation", "整个张量一起归一化：全部权重加起来为 1，而不是每一行各为 1",
               x.exp() / x.exp().sum(), "求和只在最后一维上做：sum(dim=-1, keepdim=True)。"),
    ])
    x = torch.arange(12.).reshape(2, 2, 3) % 5
    example = f"scores = {_fmt(x)}（形状 (2, 2, 3)）"
    _compare(_call(student, x, example=example, name=name), F.softmax(x, dim=-1), example, known=[
        _Known("axis-hardcoded", "softmax 固定做在第 1 维：二维输入碰巧对，三维输入 (B, L, S) 就错了",
               F.softmax(x, dim=1), "用 dim=-1（最后一维），任何形状都对。"),
    ])
    x = _tensor([0., 2., 1.])
    example = f"scores = {_fmt(x)}（一维，一个查询的分数）"
    _compare(_call(student, x, example=example, name=name), F.softmax(x, dim=-1), example)
    x = _tensor([[1000., 1001., 1002.]])
    example = f"scores = {_fmt(x)}"
    got = _as_tensor(_call(student, x, example=example, name=name), example)
    if not torch.isfinite(got).all():
        raise _Mistake("overflow", "分数很大时溢出：exp(1000) = inf，inf / inf 得到 NaN", example, got,
                       F.softmax(x, dim=-1), "先减去每一行的最大值再取 exp：softmax 的结果不变，"
                       "而最大的指数变成 exp(0) = 1。")
    _compare(got, F.softmax(x, dim=-1), example)
    x = _tensor([[0., 1.], [-1000., -999.]])
    example = f"scores = {_fmt(x)}"
    got = _as_tensor(_call(student, x, example=example, name=name), example)
    if not torch.isfinite(got).all():
        raise _Mistake("global-max", "减去的是整个张量的最大值，不是每一行的最大值："
                       "第二行的 exp 全部下溢成 0，0 / 0 得到 NaN", example, got, F.softmax(x, dim=-1),
                       "每一行减去自己的最大值：x.max(dim=-1, keepdim=True).values。")
    _compare(got, F.softmax(x, dim=-1), example)
    x = _tensor([[0., -math.inf, 0.]])
    example = "scores = [[0, -inf, 0]]"
    _compare(_call(student, x, example=example, name=name), F.softmax(x, dim=-1), example,
             hint="分数为 -inf 的键应得到权重 exp(-inf) = 0，其余的键照常归一化。")
    x = torch.full((1, 3), -math.inf)
    example = "scores = [[-inf, -inf, -inf]]"
    got = _as_tensor(_call(student, x, example=example, name=name), example)
    if got.isnan().all():
        all_masked = "得到 NaN（与 F.softmax 相同）"
    elif got.shape == x.shape and (got == 0).all():
        all_masked = "得到全 0（没有可关注的键，就不分出权重）"
    else:
        raise _Mistake("all-masked-row", "一行的分数全为 -inf 时，得到了既不是 NaN 也不是 0 的权重",
                       example, got, torch.zeros(1, 3),
                       "全为 -inf 的一行没有可关注的键：0/0 没有定义。给出 NaN（像 F.softmax）或全 0 都行，"
                       "但不能凭空分出权重。")
    x = _tensor([[1., 2., 3.]])
    before, example = x.clone(), f"scores = {_fmt(x)}"
    _call(student, x, example=example, name=name, copy=False)
    _check_unchanged(before, x, example, "x -= x.max(...) 或 x.sub_(...) 会原地修改调用者的张量；"
                     "写成 x = x - ...，得到一个新张量。")
    x = _seeded(2, 3, 5, seed=4)
    example = "scores 形状 (2, 3, 5)（固定种子的随机数）"
    _compare(_call(student, x, example=example, name=name), F.softmax(x, dim=-1), example)
    return all_masked


# ---- Deck 02: Nadaraya-Watson regression and leave-one-out ---------------

def _nw_variant(queries, keys, values, score, dim=-1, normalise=True, pool=None):
    """Nadaraya-Watson with a given score of the differences (n, m): the
    correct one and the mistakes differ only in these arguments."""
    differences = queries[:, None] - keys                      # (n, 1) - (m,) or (n, m) -> (n, m)
    scores = score(differences)
    weights = F.softmax(scores, dim=dim) if normalise else scores.exp()
    pooled = values if pool is None else pool                  # (m,) or (n, m)
    return (weights * pooled).sum(dim=-1)                      # (n,)


def _nw_reference(queries, keys, values, width):
    """The module's answer: nw_kernel_regression for shared keys (m,), and
    NWKernelRegression with w = 1 / width for per-query keys (n, m)."""
    if keys.dim() == 1:
        return nw_kernel_regression(queries, keys, values, width)[0]
    model = NWKernelRegression()
    model.w.data.fill_(1 / width)
    return model(queries, keys, values)


def check_nw_regression(nw_regression):
    """Check ``nw_regression(queries, keys, values, width)`` and print a verdict.

    Gaussian-kernel Nadaraya-Watson: weights softmax over the keys of
    -((x - x_i) / width)^2 / 2, then the weighted sum of the values.
    queries (n,); keys and values (m,) shared by every query, or (n, m) one
    row per query -> predictions (n,). Compared with the module's
    ``nw_kernel_regression`` and ``NWKernelRegression``.
    """
    return _run_checker("nw_regression", nw_regression, _nw_regression_steps, [
        "形状：keys、values 为 (m,)（所有查询共用）与 (n, m)（每个查询一行）时，输出都是 (n,)",
        "核：分数是 -((x - x_i) / width)² / 2，softmax 在键（每一行）上做，汇聚的是值",
        f"数值：与 au.nw_kernel_regression、au.NWKernelRegression（w = 1/width）一致（误差 ≤ {_TOLERANCE_TEXT}）",
        "宽度 width = 3 和 0.5 都试过（除以宽度、平方、再除以 2）"])


def _nw_regression_steps(student):
    name = "nw_regression"
    queries, keys, values, width = _tensor([0., 1.]), _tensor([0., 1., 3.]), _tensor([1., 2., 6.]), 3.0
    example = (f"queries = {_fmt(queries)}，keys = {_fmt(keys)}，values = {_fmt(values)}，"
               f"width = {width:g}")
    got = _call(student, queries, keys, values, width, example=example, name=name)

    def variant(score, **kwargs):
        return _nw_variant(queries, keys, values, score, **kwargs)

    correct = lambda d: -(d / width) ** 2 / 2                   # noqa: E731
    _compare(got, _nw_reference(queries, keys, values, width), example, known=[
        _Known("returns-weights", "返回的是注意力权重 (n, m)，不是预测 (n,)",
               F.softmax(correct(queries[:, None] - keys), dim=-1),
               "权重只是中间结果：还要对值加权求和，(weights * values).sum(dim=-1)。"),
        _Known("softmax-over-queries", "softmax 做在了查询上（第 0 维）：每个查询的权重和不为 1",
               variant(correct, dim=0), "每个查询在它的 m 个键上归一化：softmax(dim=-1)。"),
        _Known("not-squared", "距离没有平方：核应随距离的平方衰减",
               variant(lambda d: -(d / width).abs() / 2),
               "高斯核是 exp(-u² / 2)，u = (x - x_i) / width：先除以宽度，再平方。"),
        _Known("not-squared", "距离既没有取绝对值也没有平方：左边的键反而得到更大的权重",
               variant(lambda d: -(d / width) / 2), "高斯核是 exp(-u² / 2)，u = (x - x_i) / width。"),
        _Known("wrong-sign", "分数忘了负号：越远的键权重越大", variant(lambda d: (d / width) ** 2 / 2),
               "分数是负的平方距离，离查询越近，分数越大。"),
        _Known("width-multiplied", "宽度乘在了距离上，应当除：宽度越大，核应越宽",
               variant(lambda d: -(d * width) ** 2 / 2),
               "u = (x - x_i) / width。（可学习的参数 w 相当于 1/width，那时才是乘。）"),
        _Known("width-ignored", "没有用 width：核的宽度固定成了 1", variant(lambda d: -d ** 2 / 2),
               "u = (x - x_i) / width：宽度决定每个训练点影响多远。"),
        _Known("missing-half", "分数少了 / 2", variant(lambda d: -(d / width) ** 2),
               "高斯核是 exp(-u² / 2)。"),
        _Known("width-not-squared", "除的是 width 而不是 width²：σ 与 σ² 混淆了",
               variant(lambda d: -d ** 2 / width / 2), "先把距离除以宽度再平方：((x - x_i) / width)²。"),
        _Known("not-normalised", "核的权重没有归一化：每个查询的权重和不为 1（这是核加权求和，不是加权平均）",
               variant(correct, normalise=False), "用 softmax，或把 exp(分数) 除以同一行的和。"),
        _Known("keys-as-values", "加权求和用的是键，不是值", variant(correct, pool=keys),
               "键（训练输入 x_i）只用来算权重；汇聚的是值（训练输出 y_i）。"),
    ])
    keys, values = _tensor([[0., 1., 3.], [1., 2., 4.]]), _tensor([[1., 2., 6.], [2., 3., 5.]])
    example = (f"queries = {_fmt(queries)}，keys = {_fmt(keys)}，values = {_fmt(values)}"
               f"（每个查询一行），width = {width:g}")
    try:
        got = _call(student, queries, keys, values, width, example=example, name=name)
    except _StudentRaised as raised:
        if isinstance(raised.error, NotImplementedError):
            raise
        raise _Mistake("per-query-keys", "keys、values 为 (n, m)（每个查询一行）时出错", example,
                       error=raised.error,
                       hint="queries[:, None] - keys 对 (m,) 和 (n, m) 的键都能广播成 (n, m)；"
                       "加权求和写成 (weights * values).sum(dim=-1)，两种形状都适用"
                       "（weights @ values 只适用于 (m,)）。") from None
    _compare(got, _nw_reference(queries, keys, values, width), example)
    queries, keys, values, width = _seeded(4, seed=5), _seeded(6, seed=6), _seeded(6, seed=7), 0.5
    example = "queries (4,)、keys (6,)、values (6,)（固定种子的随机数），width = 0.5"
    _compare(_call(student, queries, keys, values, width, example=example, name=name),
             _nw_reference(queries, keys, values, width), example)


def check_leave_one_out(leave_one_out):
    """Check ``leave_one_out(x)`` and print a verdict.

    x (n,) -> (n, n-1): row i holds every entry of x except x[i], in their
    order. Compared with the module's ``leave_one_out``.
    """
    return _run_checker("leave_one_out", leave_one_out, _leave_one_out_steps, [
        "形状：(n,) -> (n, n-1)，n = 2、4、6 都试过",
        "第 i 行恰好去掉了 x[i] 自己，其余的点都在，顺序不变",
        "按位置而不是按值去掉：x 里有相同的值时也对",
        "与 au.leave_one_out 完全相同（torch.equal）"])


def _leave_one_out_steps(student):
    name = "leave_one_out"
    x = _tensor([1., 2., 3., 4.])
    example = f"x = {_fmt(x)}"
    got = _as_tensor(_call(student, x, example=example, name=name), example)
    expected = leave_one_out(x)
    n = x.shape[0]
    if got.shape == (n, n) and torch.equal(got, x.expand(n, n)):
        raise _Mistake("self-included", "每一行都还含着 x[i] 自己：形状是 (n, n)，应为 (n, n-1)",
                       example, got, expected, "留一法的意义就在于让第 i 个点看不到自己；"
                       "第 i 行去掉 x[i]。")
    if got.shape == (n - 1, n) and torch.equal(got, expected.T):
        raise _Mistake("transposed", "结果转置了：形状 (n-1, n)，应为 (n, n-1)", example, got, expected,
                       "第 i 行（而不是第 i 列）放 x[i] 以外的点。")
    if got.shape != (n, n - 1):
        raise _Mistake("wrong-shape", f"形状不对：应为 {(n, n - 1)}，你的结果是 {tuple(got.shape)}",
                       example, got, expected, "n 个点，每个点配其余 n-1 个点：(n, n-1)。")
    for i in range(n):
        if (got[i] == x[i]).any():
            raise _Mistake("keeps-self", f"第 {i} 行仍含有 x[{i}] = {x[i].item():g} 自己，"
                           "却漏掉了另一个点", example, got, expected,
                           "检查切片的边界：第 i 行是 x[:i] 接上 x[i+1:]。")
    for i in range(n):
        if sorted(got[i].tolist()) != sorted(expected[i].tolist()):
            raise _Mistake("wrong-points", f"第 {i} 行的点不对：有的点重复了，有的点漏掉了",
                           example, got, expected, "第 i 行应恰好包含 x[i] 以外的每个点各一次。")
    if not torch.equal(got, expected):
        raise _Mistake("order-scrambled", "每行的点对了，但顺序变了", example, got, expected,
                       "保持原来的顺序：x[:i] 接上 x[i+1:]（torch.roll 之类会把顺序转乱）。")
    for x in (_tensor([5., 7.]), _tensor([3., 1., 3., 2., 2., 4.])):
        example = f"x = {_fmt(x)}" + ("（有相同的值）" if len(set(x.tolist())) < len(x) else "")
        try:
            got = _as_tensor(_call(student, x, example=example, name=name), example)
        except _StudentRaised as raised:
            if isinstance(raised.error, NotImplementedError) or len(x) == 2:
                raise
            raise _Mistake("drops-by-value", "x 里有相同的值时出错：你是按值、而不是按位置去掉 x[i] 的",
                           example, error=raised.error, hint="x[x != x[i]] 会把与 x[i] 相等的点全部去掉；按位置去掉，"
                           "例如用 ~torch.eye(n, dtype=torch.bool) 作掩码。") from None
        expected = leave_one_out(x)
        if not (got.shape == expected.shape and torch.equal(got, expected)):
            code, title = ("drops-by-value", "x 里有相同的值时出错：你是按值、而不是按位置去掉 x[i] 的") \
                if len(x) > 2 else ("wrong-values", "结果与 au.leave_one_out 不同")
            raise _Mistake(code, title, example, got, expected,
                           "x[x != x[i]] 会把与 x[i] 相等的点全部去掉；按位置去掉，"
                           "例如用 ~torch.eye(n, dtype=torch.bool) 作掩码。")


# ---- Deck 03: masked softmax and scaled dot-product attention ------------

def _mask_variant(X, lens):
    """Softmax over the first ``lens`` keys of each (B, L) row; lens (B, L)."""
    keep = torch.arange(X.shape[-1]) < lens[..., None]         # (B, L, S)
    return torch.where(keep, X, -math.inf).softmax(dim=-1).nan_to_num(0.0)


def _torch_masked_softmax(X, valid_lens):
    """PyTorch's own softmax with masked scores set to -inf (empty rows -> 0)."""
    keep = valid_lens_to_mask(valid_lens, X.shape[1], X.shape[2])  # (B, 1 or L, S)
    return F.softmax(X.masked_fill(~keep, -math.inf), dim=-1).nan_to_num(0.0)


def check_masked_softmax(masked_softmax):
    """Check ``masked_softmax(X, valid_lens)`` (the book's signature) and print a verdict.

    X (B, L, S) scores; valid_lens None, (B,) (one length per sequence, for
    all its L queries) or (B, L) (one per query) -> weights (B, L, S), zero
    on masked keys. Checked in order: no mask, 1-D and 2-D lengths, a row
    with valid length 0 (all zeros, as ``F.scaled_dot_product_attention``
    gives, never uniform weights over padding), the caller's X untouched,
    float16, real scores below the fill value, and a finite gradient through
    an empty row. Compared with the module's ``masked_softmax`` and with
    ``F.softmax`` of -inf-filled scores.
    """
    return _run_checker("masked_softmax", masked_softmax, _masked_softmax_steps, [
        "valid_lens 为 None、(B,)（在 L 个查询上重复）、(B, L)（每个查询一个）三种情况",
        "被掩蔽的键权重恰好为 0；有效长度为 0 的行全为 0（不是均匀权重，也不是 NaN）",
        "没有改写调用者的 X；float16 能用；一行的真实分数都低于 -1e6 时权重也不漏进被掩蔽的位置",
        "反向传播经过有效长度为 0 的行，梯度没有 NaN",
        f"数值：与 au.masked_softmax、F.softmax（被掩蔽处填 -inf）一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _masked_softmax_steps(student):
    name = "masked_softmax"
    X = _tensor([[[1., 2., 3.], [2., 0., 1.]]])
    example = f"X = {_fmt(X)}，valid_lens = None"
    _compare(_call(student, X, None, example=example, name=name), masked_softmax(X, None), example, known=[
        _Known("wrong-axis", "softmax 做在了查询维（第 1 维）上，应在键维（最后一维）上", F.softmax(X, dim=1),
               "每个查询在它的 S 个键上归一化：dim=-1。"),
    ])
    X, valid_lens = torch.zeros(2, 2, 4), torch.tensor([1, 3])
    example = "X = zeros(2, 2, 4)，valid_lens = tensor([1, 3])（每个序列一个长度）"
    per_sequence = valid_lens[:, None].expand(2, 2)            # (B, L): the right lengths
    _compare(_call(student, X, valid_lens, example=example, name=name), masked_softmax(X, valid_lens),
             example, known=[
        _Known("ignores-valid-lens", "没有用 valid_lens：填充位置也分到了权重", F.softmax(X, dim=-1),
               "键 j 只在 j < valid_len 时保留；其余的分数设为 -inf，exp 之后恰好为 0。"),
        _Known("lens-per-query", "一维 valid_lens 被当成了每个查询一个长度（repeat 或广播错了维）",
               _mask_variant(X, valid_lens[None, :].expand(2, 2)),
               "一维 valid_lens 是每个序列一个长度：序列 b 的 L 个查询都用 valid_lens[b]，"
               "即 repeat_interleave(L)，不是 repeat(L)。"),
        _Known("off-by-one", "多保留了一个键：掩码写成了 j <= valid_len", _mask_variant(X, per_sequence + 1),
               "有效长度为 v 时保留的是键 0 .. v-1：j < valid_len。"),
        _Known("mask-flipped", "掩码反了：保留了填充位置，挡住了有效的键",
               torch.where(torch.arange(4) >= per_sequence[..., None], 1.0, 0.0)
               / (4 - per_sequence[..., None]),
               "布尔掩码 True 表示允许关注（本课程与 F.scaled_dot_product_attention 的约定）。"),
    ])
    valid_lens = torch.tensor([[1, 3]])
    X = torch.zeros(1, 2, 3)
    example = "X = zeros(1, 2, 3)，valid_lens = tensor([[1, 3]])（每个查询一个长度）"
    _compare(_call(student, X, valid_lens, example=example, name=name), masked_softmax(X, valid_lens),
             example, hint="二维 valid_lens (B, L) 给每个查询自己的长度，不用再重复。")
    X, valid_lens = torch.zeros(1, 1, 4), torch.tensor([0])
    example = "X = zeros(1, 1, 4)，valid_lens = tensor([0])"
    got = _as_tensor(_call(student, X, valid_lens, example=example, name=name), example)
    if got.shape == X.shape and torch.allclose(got, torch.full_like(X, 0.25)):
        raise _Mistake("uniform-empty-row", "有效长度为 0 的行得到了均匀权重 0.25：它在给填充位置分配注意力",
                       example, got, torch.zeros_like(X),
                       "书中的做法（填 -1e6）在整行都被掩蔽时给出均匀权重，输出随填充的值而变。本练习按本课程的约定"
                       "（F.scaled_dot_product_attention 自 PyTorch 2.5 起也如此）：一个有效的键都没有时，权重全为 0。")
    if got.shape == X.shape and got.isnan().any():
        raise _Mistake("nan-empty-row", "有效长度为 0 的行得到了 NaN：整行都是 -inf，softmax 是 0/0",
                       example, got, torch.zeros_like(X),
                       "softmax 之后把没有任何有效键的行置为 0（例如 torch.where(keep, weights, 0)）。")
    _compare(got, torch.zeros_like(X), example)
    X, valid_lens = _tensor([[[0.5, 1., -1., 2.], [1., 0., 0., 3.]]]), torch.tensor([2])
    before, example = X.clone(), f"X = {_fmt(X)}，valid_lens = tensor([2])"
    _call(student, X, valid_lens, example=example, name=name, copy=False)
    _check_unchanged(before, X, example, "通过 reshape 得到的视图原地赋值（书中的 sequence_mask 就是这样）"
                     "会改掉调用者的分数。用 torch.where 或 masked_fill（非原地）生成新张量。")
    X, valid_lens = _tensor([[[1., 2., 3., 4.], [1., 1., 1., 1.]]]).half(), torch.tensor([[2, 0]])
    example = "X（float16）= [[[1, 2, 3, 4], [1, 1, 1, 1]]]，valid_lens = tensor([[2, 0]])"
    expected = masked_softmax(X.float(), valid_lens)
    try:
        got = _as_tensor(_call(student, X, valid_lens, example=example, name=name), example)
    except _StudentRaised as raised:
        if isinstance(raised.error, NotImplementedError):
            raise
        raise _Mistake("float16-overflow", "float16 的输入出错：-1e6 超出了 float16 的范围（最大约 65504）",
                       example, error=raised.error, hint="用 -inf 作填充值，"
                       "它属于每种浮点类型，exp(-inf) 恰好为 0。") from None
    if got.isnan().any():
        raise _Mistake("float16-nan", "float16 的输入得到了 NaN：-1e6 在 float16 里溢出成 -inf，"
                       "整行被掩蔽时成了 0/0", example, got, expected,
                       "用 -inf 作填充值，并把没有有效键的行置为 0。")
    _compare(got, expected, example, tol=1e-3)
    X, valid_lens = _tensor([[[-2e6, -2e6, -2e6]]]), torch.tensor([1])
    example = "X = [[[-2e6, -2e6, -2e6]]]，valid_lens = tensor([1])"
    got = _as_tensor(_call(student, X, valid_lens, example=example, name=name), example)
    leaked = got.shape == X.shape and got[0, 0, 1:].abs().sum() > 1e-3
    if leaked:
        raise _Mistake("leaks-below-fill", "真实分数低于你的填充值时，权重漏进了被掩蔽的位置",
                       example, got, masked_softmax(X, valid_lens),
                       "书中填 -1e6：分数 -2e6 比它还低，被掩蔽的键反而占了上风。填 -inf，"
                       "任何真实分数都比它大。")
    _compare(got, masked_softmax(X, valid_lens), example)
    X, valid_lens = _seeded(2, 3, 5, seed=8), torch.tensor([[2, 0, 5], [1, 4, 3]])
    example = f"X 形状 (2, 3, 5)（固定种子的随机数），valid_lens = {_fmt(valid_lens)}"
    got = _compare(_call(student, X, valid_lens, example=example, name=name),
                   masked_softmax(X, valid_lens), example)
    _compare_builtin(got, _torch_masked_softmax(X, valid_lens), example, "F.softmax（被掩蔽处填 -inf）")
    _check_empty_row_gradient(student, name)


def _check_empty_row_gradient(student, name):
    """Backpropagate through a row with valid length 0: the gradient must stay
    finite (an additive -inf mask zeroed after the softmax gives NaN)."""
    X, valid_lens = _seeded(1, 2, 4, seed=9), torch.tensor([[2, 0]])
    upstream = _seeded(1, 2, 4, seed=10)
    example = ("X 形状 (1, 2, 4)（需要梯度），valid_lens = tensor([[2, 0]])，"
               "对 (权重 × 固定的随机数).sum() 反向传播")
    expected = X.clone().requires_grad_()
    with torch.enable_grad():
        (masked_softmax(expected, valid_lens) * upstream).sum().backward()
        leaf = X.clone().requires_grad_()
        got = _call(student, leaf, valid_lens, example=example, name=name, copy=False)
        if not (isinstance(got, torch.Tensor) and got.requires_grad):
            return                              # nothing flows back: the forward checks decide
        (got * upstream).sum().backward()
    if leaf.grad is not None and not torch.isfinite(leaf.grad).all():
        raise _Mistake("nan-gradient", "前向结果正确，但反向传播经过有效长度为 0 的行时，X 的梯度是 NaN",
                       example, leaf.grad, expected.grad,
                       "把 -inf 加到分数上（加性掩码）时，空行的 softmax 是 0/0 = NaN；之后把权重置 0 "
                       "挡不住 NaN 的梯度。改用 torch.where(keep, X, -inf) 或 masked_fill 填充："
                       "被换掉的位置梯度恰为 0。")


def _sdpa_variant(queries, keys, values, scale, dim=-1, transpose=True, valid_lens=None):
    """softmax(q kᵀ * scale) v with the knobs the known mistakes turn."""
    scores = queries @ (keys.transpose(1, 2) if transpose else keys) * scale  # (B, L, S)
    if valid_lens is not None:
        return masked_softmax(scores, valid_lens) @ values
    return F.softmax(scores, dim=dim) @ values


def _sdpa_builtin(queries, keys, values, valid_lens=None):
    keep = None if valid_lens is None else valid_lens_to_mask(valid_lens, queries.shape[1], keys.shape[1])
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep)


def check_scaled_dot_product(scaled_dot_product_attention):
    """Check ``scaled_dot_product_attention(queries, keys, values, valid_lens=None)``
    and print a verdict.

    queries (B, L, E), keys (B, S, E), values (B, S, Ev), valid_lens None,
    (B,) or (B, L) -> (B, L, Ev): softmax(q kᵀ / √E) v with masked keys
    dropped. Compared with ``au.DotProductAttention`` and
    ``F.scaled_dot_product_attention`` (with the boolean mask, True = keep).
    """
    return _run_checker("scaled_dot_product_attention", scaled_dot_product_attention,
                        _scaled_dot_product_steps, [
        "形状：(B, L, E)、(B, S, E)、(B, S, Ev) -> (B, L, Ev)，L、S、E、Ev 各不相同也对",
        "分数除以 √E（不是 E，也不是 √Ev），softmax 在键上做，键做了转置",
        "valid_lens 为 None、(B,)、(B, L) 时都掩蔽了正确的键；有效长度为 0 的查询输出 0",
        f"数值：与 au.DotProductAttention、F.scaled_dot_product_attention 一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _scaled_dot_product_steps(student):
    name = "scaled_dot_product_attention"
    queries = _tensor([[[1., 0.], [0., 2.]]])                  # (1, 2, 2): L = 2, E = 2
    keys = _tensor([[[1., 1.], [2., 0.]]])                     # (1, 2, 2): S = E, so kᵀ and k both fit
    values = _tensor([[[1., 0., 2.], [3., 1., 0.]]])           # (1, 2, 3): Ev = 3
    example = f"queries = {_fmt(queries)}，keys = {_fmt(keys)}，values = {_fmt(values)}"
    E = queries.shape[-1]

    def variant(scale, **kwargs):
        return _sdpa_variant(queries, keys, values, scale, **kwargs)

    got = _call(student, queries, keys, values, example=example, name=name)
    _compare(got, DotProductAttention(0)(queries, keys, values), example, known=[
        _Known("returns-weights", "返回的是注意力权重 (B, L, S)，不是输出 (B, L, Ev)",
               F.softmax(queries @ keys.transpose(1, 2) / math.sqrt(E), dim=-1),
               "权重还要乘以值：weights @ values。"),
        _Known("no-scaling", "分数没有除以 √E", variant(1.0),
               "点积的方差随 E 增大；除以 √E 让它回到 1，softmax 才不会饱和。"),
        _Known("divide-by-E", "分数除以了 E，应除以 √E", variant(1 / E),
               "q·k 的标准差是 √E（方差是 E），所以除以 √E。"),
        _Known("scale-multiplied", "分数乘以了 √E，应除以 √E", variant(math.sqrt(E)), "除以 √E。"),
        _Known("wrong-size-scale", "除以的是 √Ev（值的维数），应是 √E（查询和键的维数）",
               variant(1 / math.sqrt(values.shape[-1])), "用 queries.shape[-1]。"),
        _Known("wrong-axis", "softmax 做在了查询维上，应在键维（最后一维）上",
               variant(1 / math.sqrt(E), dim=1), "每个查询在它的 S 个键上归一化：dim=-1。"),
        _Known("keys-not-transposed", "键没有转置：分数成了 queries @ keys，乘错了维",
               variant(1 / math.sqrt(E), transpose=False),
               "分数是 (B, L, E) @ (B, E, S)：keys.transpose(1, 2)。这里 S = E，所以没有报错。"),
    ])
    queries, keys, values = _seeded(2, 3, 2, seed=9), _seeded(2, 4, 2, seed=10), _seeded(2, 4, 5, seed=11)
    example = "queries (2, 3, 2)、keys (2, 4, 2)、values (2, 4, 5)（固定种子的随机数），valid_lens = None"
    got = _compare(_call(student, queries, keys, values, example=example, name=name),
                   DotProductAttention(0)(queries, keys, values), example)
    _compare_builtin(got, _sdpa_builtin(queries, keys, values), example, "F.scaled_dot_product_attention")
    small = _tensor([[[1., 0.]]]), _tensor([[[1., 0.], [0., 1.], [1., 1.]]]), _tensor([[[1.], [2.], [6.]]])
    example = "queries = {}，keys = {}，values = {}，valid_lens = tensor([{}])".format(
        *map(_fmt, small), 2)
    got = _call(student, *small, torch.tensor([2]), example=example, name=name)
    _compare(got, DotProductAttention(0)(*small, torch.tensor([2])), example, known=[
        _Known("ignores-valid-lens", "没有用 valid_lens：填充位置的键也分到了权重",
               _sdpa_variant(*small, 1 / math.sqrt(2)),
               "把分数交给掩蔽softmax：au.masked_softmax(scores, valid_lens)。"),
    ])
    for valid_lens in (torch.tensor([1, 3]), torch.tensor([[1, 2, 4], [4, 3, 1]])):
        example = ("queries (2, 3, 2)、keys (2, 4, 2)、values (2, 4, 5)（固定种子的随机数），"
                   f"valid_lens = {_fmt(valid_lens)}")
        got = _call(student, queries, keys, values, valid_lens, example=example, name=name)
        got = _compare(got, DotProductAttention(0)(queries, keys, values, valid_lens), example)
        _compare_builtin(got, _sdpa_builtin(queries, keys, values, valid_lens), example,
                         "F.scaled_dot_product_attention（attn_mask 为布尔掩码）")
    queries, keys, values = small
    example = "queries = {}，keys = {}，values = {}，valid_lens = tensor([{}])".format(
        *map(_fmt, small), 0)
    got = _call(student, queries, keys, values, torch.tensor([0]), example=example, name=name)
    expected = DotProductAttention(0)(queries, keys, values, torch.tensor([0]))
    _compare(got, expected, example, known=[
        _Known("uniform-empty-row", "有效长度为 0 的查询得到了所有值的平均：均匀权重分给了填充位置",
               values.mean(dim=1, keepdim=True),
               "书中的掩蔽softmax 填 -1e6，整行都被掩蔽时给出均匀权重，输出随填充的值而变。本练习按本课程的约定："
               "一个有效的键都没有时输出为 0（au.masked_softmax 与 F.scaled_dot_product_attention 都给出 0）。"),
        _Known("nan-empty-row", "有效长度为 0 的查询得到了 NaN：整行分数都是 -inf，softmax 是 0/0",
               torch.full_like(expected, math.nan), "用 au.masked_softmax，它把没有有效键的行置为 0。"),
    ])


# ---- Deck 04: splitting heads, and multi-head attention's forward --------

def check_transpose_qkv(transpose_qkv, transpose_output):
    """Check ``transpose_qkv(X, num_heads)`` and ``transpose_output(X, num_heads)``
    together and print a verdict.

    transpose_qkv: (B, n, H*d) -> (B*H, n, d), head i of sequence b in row
    b*H + i holding columns [i*d, (i+1)*d). transpose_output undoes it:
    (B*H, n, d) -> (B, n, H*d). Compared with the module's functions, and
    the round trip must give X back exactly.
    """
    return _run_checker("transpose_qkv", transpose_qkv, _transpose_steps, [
        "transpose_qkv：(B, n, H·d) -> (B·H, n, d)，第 b·H + i 片是序列 b 的头 i，取第 i·d 到 (i+1)·d 列",
        "transpose_output：(B·H, n, d) -> (B, n, H·d)，正好是它的逆",
        "往返一次得到原来的 X（torch.equal）；H = 1、H = 4，以及 B、n、d 各不相同都试过",
        "与 au.transpose_qkv、au.transpose_output 完全相同（torch.equal）"], extra=(transpose_output,))


def _transpose_steps(student_qkv, student_output):
    B, n, H, d = 2, 2, 2, 2
    X = torch.arange(16.).reshape(B, n, H * d)
    example = "X = torch.arange(16.).reshape(2, 2, 4)，num_heads = 2（B = 2，n = 2，H = 2，d = 2）"
    got = _call(student_qkv, X, H, example=example, name="transpose_qkv")
    _compare(got, transpose_qkv(X, H), example, known=[
        _Known("forgot-fold", "少了最后一步：形状是 (B, H, n, d)，头还没有并进批量维",
               X.reshape(B, n, H, d).permute(0, 2, 1, 3),
               "最后 reshape(B * num_heads, n, d)，一次批量矩阵乘法就能算所有的头。"),
        _Known("heads-across-positions", "头被切到了不同的位置上：只 reshape、没有 permute",
               X.reshape(B * H, n, d),
               "先 reshape 成 (B, n, H, d)，再 permute(0, 2, 1, 3) 把头换到位置前面，最后才合并。"),
        _Known("heads-interleaved", "头是交错取列的（第 c 列归头 c % H），应取连续的 d 列",
               X.reshape(B, n, d, H).permute(0, 3, 1, 2).reshape(B * H, n, d),
               "头 i 取第 i·d 到 (i+1)·d 列：reshape(B, n, H, d)，H 在 d 前面。"),
        _Known("head-major", "批量维的顺序反了：第 i·B + b 片放序列 b 的头 i，应是第 b·H + i 片",
               X.reshape(B, n, H, d).permute(2, 0, 1, 3).reshape(B * H, n, d),
               "permute(0, 2, 1, 3)：批量在前、头在后，这样 valid_lens 用 repeat_interleave 对得上。"),
    ], hint="对照 au.transpose_qkv 的注释，逐步打印形状。")
    Y = torch.arange(16.).reshape(B * H, n, d)
    example = "X = torch.arange(16.).reshape(4, 2, 2)，num_heads = 2（B·H = 4，n = 2，d = 2）"
    got = _call(student_output, Y, H, example=example, name="transpose_output")
    _compare(got, transpose_output(Y, H), example, known=[
        _Known("output-heads-across-positions", "transpose_output 只 reshape、没有 permute：头没有回到特征维",
               Y.reshape(B, n, H * d), "先 reshape 成 (B, H, n, d)，permute(0, 2, 1, 3)，再合并最后两维。"),
        _Known("output-head-major", "transpose_output 把第 b·H + i 片当成了第 i·B + b 片",
               Y.reshape(H, B, n, d).permute(1, 2, 0, 3).reshape(B, n, H * d),
               "它要撤销 transpose_qkv：reshape(-1, num_heads, n, d)，批量在前。"),
        _Known("output-interleaved", "transpose_output 把各头的列交错放回，应把每个头的 d 列连续放",
               Y.reshape(B, H, n, d).permute(0, 2, 3, 1).reshape(B, n, H * d),
               "permute(0, 2, 1, 3)：(B, n, H, d)，再合并成 H·d。"),
    ], hint="transpose_output 要正好撤销 transpose_qkv。")
    for B, n, H, d in ((2, 3, 1, 4), (3, 5, 4, 3)):
        X = _seeded(B, n, H * d, seed=12)
        example = f"X 形状 ({B}, {n}, {H * d})（固定种子的随机数），num_heads = {H}"
        got = _call(student_qkv, X, H, example=example, name="transpose_qkv")
        got = _compare(got, transpose_qkv(X, H), example, hint="检查是否把某个大小写死了（如 2）。")
        if not torch.equal(got, transpose_qkv(X, H)):            # moving numbers never rounds them
            raise _Mistake("not-exact", "与 au.transpose_qkv 只是接近、不完全相同：数值被算过了", example,
                           hint="只用 reshape 和 permute 搬动数，不做任何运算。")
        back = _as_tensor(_call(student_output, got, H, example=example, name="transpose_output"), example)
        if not (back.shape == X.shape and torch.equal(back, X)):
            raise _Mistake("round-trip", "往返一次没有得到原来的 X：transpose_output 不是 transpose_qkv 的逆",
                           example, hint="transpose_output(transpose_qkv(X, H), H) 应与 X 完全相同。")


def _multihead_variant(mha, queries, keys, values, valid_lens, split=True, permute=True,
                       repeat=torch.repeat_interleave, project_output=True, key_weight=None):
    """Multi-head attention's forward with the knobs the known mistakes turn."""
    H = mha.num_heads if split else 1

    def heads(X):                                              # (B, n, h) -> (B*H, n, h/H)
        if permute:
            return transpose_qkv(X, H)
        return X.reshape(X.shape[0] * H, X.shape[1], -1)

    q = heads(mha.W_q(queries))
    k = heads((mha.W_k if key_weight is None else key_weight)(keys))
    v = heads(mha.W_v(values))
    lens = None if valid_lens is None else repeat(valid_lens, H, dim=0)
    output = DotProductAttention(0)(q, k, v, lens)               # (B*H, L, d)
    output = (transpose_output(output, H) if permute
              else output.reshape(queries.shape[0], queries.shape[1], -1))  # (B, L, h)
    return mha.W_o(output) if project_output else output


def _repeat_whole(valid_lens, times, dim=0):
    """The mistake: [l0, l1] -> [l0, l1, l0, l1] instead of [l0, l0, l1, l1]."""
    return valid_lens.repeat(times, *([1] * (valid_lens.dim() - 1)))


def check_multihead_forward(multihead_forward):
    """Check ``multihead_forward(mha, queries, keys, values, valid_lens)`` and
    print a verdict.

    The student writes the forward pass of an ``au.MultiHeadAttention``
    ``mha`` from its parts: ``mha.W_q``, ``mha.W_k``, ``mha.W_v``,
    ``mha.W_o``, ``mha.num_heads`` and ``mha.attention`` (scaled dot-product
    attention over (B*H, ., d)). queries (B, L, ·), keys (B, S, ·),
    values (B, S, ·), valid_lens None, (B,) or (B, L) -> (B, L, h).
    Compared with ``mha`` itself and with ``nn.MultiheadAttention`` holding
    the same weights.
    """
    return _run_checker("multihead_forward", multihead_forward, _multihead_steps, [
        "形状：(B, L, h)；先用 W_q、W_k、W_v 投影，再把头并进批量维，最后合并并乘 W_o",
        "每个头在自己的 d = h/H 维上做缩放点积（除以 √d，不是 √h）",
        "valid_lens 为 None、(B,)、(B, L) 时，每个头都掩蔽自己序列的填充（repeat_interleave）",
        f"数值：与 au.MultiHeadAttention、复制了权重的 nn.MultiheadAttention 一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _multihead_steps(student):
    name = "multihead_forward"
    mha = MultiHeadAttention(4, 4, 4, num_hiddens=4, num_heads=2, dropout=0).eval()
    queries, keys, values = _seeded(2, 2, 4, seed=13), _seeded(2, 3, 4, seed=14), _seeded(2, 3, 4, seed=15)
    inputs = ("mha = au.MultiHeadAttention(4, 4, 4, num_hiddens=4, num_heads=2, dropout=0)，"
              "queries (2, 2, 4)、keys (2, 3, 4)、values (2, 3, 4)（固定种子的随机数）")
    example = inputs + "，valid_lens = None"

    def variant(valid_lens=None, **kwargs):
        return _multihead_variant(mha, queries, keys, values, valid_lens, **kwargs)

    got = _call(student, mha, queries, keys, values, None, example=example, name=name)
    _compare(got, mha(queries, keys, values), example, known=[
        _Known("no-output-projection", "最后没有乘 W_o：各头的输出拼起来就返回了", variant(project_output=False),
               "把各头拼接之后，还要经过输出投影 mha.W_o，让各头的信息混合。"),
        _Known("no-head-split", "没有分头：在整个 h 维上只做了一次点积（等于除以 √h 而不是 √d）",
               variant(split=False), "投影之后用 transpose_qkv 把 h 维切成 H 个 d 维的头，每个头各做一次注意力。"),
        _Known("heads-across-positions", "头被切到了不同的位置上：只 reshape、没有 permute",
               variant(permute=False), "用 au.transpose_qkv / au.transpose_output，或先 permute 再合并。"),
        _Known("keys-projected-with-W_q", "键用 W_q 投影了，应当用 W_k", variant(key_weight=mha.W_q),
               "查询、键、值各有自己的投影：W_q、W_k、W_v。"),
    ], hint="逐步对照 au.MultiHeadAttention.forward 的注释。")
    for valid_lens in (torch.tensor([1, 3]), torch.tensor([[2, 3], [1, 2]])):
        example = (inputs + f"，valid_lens = {_fmt(valid_lens)}"
                   f"（每{'个序列' if valid_lens.dim() == 1 else '个查询'}一个长度）")
        try:
            got = _call(student, mha, queries, keys, values, valid_lens, example=example, name=name)
        except _StudentRaised as raised:
            if "valid_lens" not in str(raised.error):
                raise
            if valid_lens.dim() == 2:            # (B,) worked, (B, L) did not: flattened
                raise _Mistake("lens-flattened", "二维的 valid_lens (B, L) 被拉平成了一维：repeat_interleave 没写 dim=0",
                               example, error=raised.error,
                               hint="不写 dim 时 repeat_interleave 先把张量拉平；按序列重复要沿第 0 维："
                               "valid_lens.repeat_interleave(num_heads, dim=0)。") from None
            raise _Mistake("lens-not-repeated", "valid_lens 的形状与 B·H 个头对不上", example,
                           error=raised.error,
                           hint="头并进了批量维，valid_lens 也要跟着重复：第 b·H + i 片是序列 b 的头 i，"
                           "所以用 valid_lens.repeat_interleave(num_heads, dim=0)。") from None
        _compare(got, mha(queries, keys, values, valid_lens), example, known=[
            _Known("repeat-not-interleave", "valid_lens 用 repeat 重复了：头拿到了别的序列的有效长度",
                   variant(valid_lens, repeat=_repeat_whole),
                   "第 b·H + i 片是序列 b 的头 i，长度要写成 [l0, l0, l1, l1]：repeat_interleave，"
                   "而 repeat 得到 [l0, l1, l0, l1]。"),
            _Known("ignores-valid-lens", "没有把 valid_lens 传给注意力：填充位置的键也分到了权重",
                   variant(None), "把重复过的 valid_lens 传给 mha.attention。"),
        ])
    valid_lens = torch.tensor([1, 3])
    example = inputs + "，valid_lens = [1, 3]，与 nn.MultiheadAttention(4, 2, bias=False, batch_first=True) 对照"
    got = _as_tensor(_call(student, mha, queries, keys, values, valid_lens, example=example, name=name), example)
    _compare_builtin(got, _torch_multihead(mha, queries, keys, values, valid_lens), example,
                     "nn.MultiheadAttention（复制了权重，key_padding_mask 为 True 表示忽略）")


def _torch_multihead(mha, queries, keys, values, valid_lens):
    """nn.MultiheadAttention with ``mha``'s weights; its key_padding_mask is
    True where a key is IGNORED, the opposite of this module's masks."""
    h = mha.W_o.out_features
    torch_mha = nn.MultiheadAttention(h, mha.num_heads, bias=False, batch_first=True).eval()
    torch_mha.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
    torch_mha.out_proj.weight.copy_(mha.W_o.weight)
    ignore = ~valid_lens_to_mask(valid_lens, 1, keys.shape[1])[:, 0]  # (B, S)
    return torch_mha(queries, keys, values, key_padding_mask=ignore, need_weights=False)[0]


# ---- Deck 05: sinusoidal positional encoding, and a causal mask ----------

def _encoding_variant(num_steps, num_hiddens, base=10000, exponent_step=2, first_position=0,
                      swap=False, interleave=True):
    """Sinusoidal encodings (num_steps, num_hiddens) with the knobs the known
    mistakes turn; the defaults give the right one for even num_hiddens."""
    position = torch.arange(first_position, first_position + num_steps, dtype=torch.float32)[:, None]
    i = torch.arange(num_hiddens // 2, dtype=torch.float32)   # pair index
    angles = position / base ** (exponent_step * i / num_hiddens)  # (num_steps, h/2)
    even, odd = (angles.cos(), angles.sin()) if swap else (angles.sin(), angles.cos())
    if not interleave:
        return torch.cat([even, odd], dim=1)                   # [sin ..., cos ...]
    return torch.stack([even, odd], dim=2).reshape(num_steps, -1)  # sin, cos, sin, cos, ...


def check_positional_encoding(positional_encoding):
    """Check ``positional_encoding(num_steps, num_hiddens)`` and print a verdict.

    Returns P (num_steps, num_hiddens): P[pos, 2i] = sin(pos / 10000^(2i/d)),
    P[pos, 2i+1] = cos(pos / 10000^(2i/d)), positions 0, 1, ...; an odd d
    has one more sin column than cos. Compared with the module's
    ``PositionalEncoding(...).P[0]``.
    """
    return _run_checker("positional_encoding", positional_encoding, _positional_encoding_steps, [
        "形状：(num_steps, num_hiddens)，没有批量维",
        "偶数列是 sin、奇数列是 cos，交错排列；位置从 0 开始；频率 1/10000^(2j/d)",
        "num_hiddens 为奇数时最后一列是 sin",
        f"数值：与 au.PositionalEncoding 的 P 一致（50 个位置、16 维，误差 ≤ {_TOLERANCE_TEXT}）"])


def _positional_encoding_steps(student):
    name = "positional_encoding"
    example = "num_steps = 3，num_hiddens = 4"
    expected = PositionalEncoding(4, 0, max_len=3).P[0]
    got = _call(student, 3, 4, example=example, name=name)
    _compare(got, expected, example, known=[
        _Known("extra-batch-dim", "多了一个批量维：形状 (1, num_steps, num_hiddens)，应为 (num_steps, num_hiddens)",
               expected[None], "返回 P 本身即可；PositionalEncoding 里的 P[:, :n] 是给加到 (B, n, h) 上用的。"),
        _Known("sin-cos-swapped", "sin 与 cos 放反了：偶数列应是 sin，奇数列是 cos",
               _encoding_variant(3, 4, swap=True), "第 0 个位置的编码应是 [0, 1, 0, 1]：sin 0 = 0，cos 0 = 1。"),
        _Known("exponent-i-over-d", "指数写成了 j/d，应为 2j/d（j 是第几对列）",
               _encoding_variant(3, 4, exponent_step=1),
               "第 j 对列的频率是 1/10000^(2j/d)：最后一对的周期接近 2π·10000。"),
        _Known("wrong-base", "底数不是 10000（这里用了 1000）", _encoding_variant(3, 4, base=1000),
               "频率是 1/10000^(2j/d)。"),
        _Known("positions-from-1", "位置从 1 开始了，应从 0 开始", _encoding_variant(3, 4, first_position=1),
               "第一个词元的位置是 0：torch.arange(num_steps)。"),
        _Known("halves-concatenated", "sin 和 cos 各占一半拼接，应交错排列（sin, cos, sin, cos, …）",
               _encoding_variant(3, 4, interleave=False), "P[:, 0::2] = sin(...)，P[:, 1::2] = cos(...)。"),
    ], hint="第 0 个位置应为 [0, 1, 0, 1]；逐列对照公式。")
    example = "num_steps = 50，num_hiddens = 16"
    _compare(_call(student, 50, 16, example=example, name=name), PositionalEncoding(16, 0, max_len=50).P[0],
             example)
    example = "num_steps = 3，num_hiddens = 5（奇数）"
    try:
        got = _call(student, 3, 5, example=example, name=name)
    except _StudentRaised as raised:
        if isinstance(raised.error, NotImplementedError):
            raise
        raise _Mistake("odd-hiddens", "num_hiddens 为奇数时出错", example, error=raised.error,
                       hint="d 为奇数时 sin 有 ⌈d/2⌉ 列、cos 只有 ⌊d/2⌋ 列：cos 只取前 d // 2 列的角度。") from None
    _compare(got, PositionalEncoding(5, 0, max_len=3).P[0], example,
             hint="d 为奇数时 sin 有 ⌈d/2⌉ 列、cos 只有 ⌊d/2⌋ 列，最后一列是 sin。")


def _causal_reference(num_steps):
    """The module's causal mask: query t keeps keys 0..t (True = allowed)."""
    return valid_lens_to_mask(causal_valid_lens(1, num_steps), num_steps, num_steps)[0]


def check_causal_mask(causal_mask):
    """Check ``causal_mask(num_steps)`` and print a verdict.

    Returns a bool (L, S) = (num_steps, num_steps) mask, True where query t
    may attend to key s, i.e. s <= t (the module's and
    ``F.scaled_dot_product_attention``'s convention; ``nn.MultiheadAttention``'s
    ``attn_mask`` and ``torch.triu`` masks mean the opposite). Compared with
    the module's mask and with ``F.scaled_dot_product_attention(is_causal=True)``.
    """
    return _run_checker("causal_mask", causal_mask, _causal_mask_steps, [
        "形状 (num_steps, num_steps)，类型 torch.bool，True 表示允许关注",
        "查询 t 能看到键 0 .. t（含自己），看不到未来；num_steps = 1、3、5 都试过",
        "与 au.causal_valid_lens 得到的掩码完全相同（torch.equal）",
        f"作为 attn_mask 交给 F.scaled_dot_product_attention，与 is_causal=True 一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _causal_mask_steps(student):
    name = "causal_mask"
    example = "num_steps = 3"
    expected = _causal_reference(3)
    got = _as_tensor(_call(student, 3, example=example, name=name), example, "一个布尔张量")
    if got.shape != (3, 3):
        raise _Mistake("wrong-shape", f"形状不对：应为 (3, 3)，你的结果是 {tuple(got.shape)}", example, got,
                       expected, "一个查询一行、一个键一列：(num_steps, num_steps)，不要批量维。")
    if got.is_floating_point() and torch.equal(got, torch.zeros(3, 3).masked_fill(~expected, -math.inf)):
        raise _Mistake("additive-float-mask", "返回的是浮点的加性掩码（0 与 -inf，nn.Transformer 的写法），"
                       "本课程用布尔掩码", example, got, expected,
                       "返回 torch.bool 张量，True 表示允许关注，可直接作为 F.scaled_dot_product_attention 的 attn_mask。")
    if got.dtype != torch.bool:
        values_right = torch.equal(got != 0, expected) and bool(((got == 0) | (got == 1)).all())
        raise _Mistake("not-bool", f"类型是 {got.dtype}，应为 torch.bool" + ("（值是对的）" if values_right else ""),
                       example, got, expected,
                       "torch.tril(torch.ones(n, n, dtype=torch.bool))，或用比较运算得到布尔张量。")
    ones = torch.ones(3, 3, dtype=torch.bool)
    for code, title, wrong, hint in [
        ("future-allowed", "能看到未来：掩码是上三角（转置了），查询 0 看到了所有的键", ones.triu(),
         "查询 t（第 t 行）只能看键 0 .. t：下三角，torch.tril。"),
        ("polarity-flipped", "True 与 False 反了：True 标的是要忽略的未来（nn.MultiheadAttention 的 attn_mask "
         "和 torch.triu 的写法）", ones.triu(1),
         "本课程和 F.scaled_dot_product_attention 约定 True 表示允许关注；取反即可：~mask。"),
        ("diagonal-excluded", "对角线被挡住了：查询 t 看不到它自己（第 t 个键）", ones.tril(-1),
         "自注意力里查询 t 可以看自己：torch.tril 的 diagonal=0。"),
        ("off-by-one", "多看了一步：查询 t 能看到键 t+1", ones.tril(1), "torch.tril 的 diagonal 应为 0。"),
        ("no-mask", "全为 True：没有挡住任何未来的位置", ones, "查询 t 只能看键 0 .. t：下三角。"),
    ]:
        if torch.equal(got, wrong):
            raise _Mistake(code, title, example, got, expected, hint)
    if not torch.equal(got, expected):
        raise _Mistake("wrong-values", "掩码不对", example, got, expected, "查询 t（第 t 行）允许键 0 .. t。")
    for num_steps in (1, 5):
        example = f"num_steps = {num_steps}"
        got = _as_tensor(_call(student, num_steps, example=example, name=name), example, "一个布尔张量")
        if not (got.shape == (num_steps, num_steps) and torch.equal(got, _causal_reference(num_steps))):
            raise _Mistake("wrong-values", "这个长度下掩码不对（是否把长度写死了？）", example, got,
                           _causal_reference(num_steps), "查询 t（第 t 行）允许键 0 .. t。")
    queries, keys, values = _seeded(1, 5, 2, seed=16), _seeded(1, 5, 2, seed=17), _seeded(1, 5, 3, seed=18)
    example = "num_steps = 5，作为 F.scaled_dot_product_attention 的 attn_mask"
    _compare_builtin(F.scaled_dot_product_attention(queries, keys, values, attn_mask=got),
                     F.scaled_dot_product_attention(queries, keys, values, is_causal=True), example,
                     "F.scaled_dot_product_attention(is_causal=True)")


# ---- Deck 06: additive scores, and one step of the Bahdanau decoder ------

def _additive_variant(queries, keys, W_q, W_k, w_v, tanh=torch.tanh, apart=False, w_v_first=False):
    """Additive scores (B, L, S) with the knobs the known mistakes turn."""
    q, k = W_q(queries), W_k(keys)                             # (B, L, h), (B, S, h)
    if apart:                                                  # tanh of each, then add
        features = tanh(q).unsqueeze(2) + tanh(k).unsqueeze(1)
    elif w_v_first:
        return tanh(w_v(q.unsqueeze(2) + k.unsqueeze(1)).squeeze(-1))
    else:
        features = tanh(q.unsqueeze(2) + k.unsqueeze(1))       # (B, L, S, h)
    return w_v(features).squeeze(-1)                           # (B, L, S)


def check_additive_scores(additive_scores):
    """Check ``additive_scores(queries, keys, W_q, W_k, w_v)`` and print a verdict.

    queries (B, L, query_size), keys (B, S, key_size); W_q, W_k, w_v the
    ``nn.Linear`` layers of an ``au.AdditiveAttention`` -> scores (B, L, S),
    score[b, l, s] = w_vᵀ tanh(W_q q_l + W_k k_s), before any softmax. The
    scores' masked softmax is compared with the attention weights of the
    module's ``AdditiveAttention`` holding those layers.
    """
    return _run_checker("additive_scores", additive_scores, _additive_scores_steps, [
        "形状：(B, L, S)，每个查询与每个键配对（广播），L ≠ S 也对",
        "tanh 在 W_q q + W_k k 之和上，w_v 在 tanh 之后；返回的是分数，不是 softmax 之后的权重",
        f"数值：掩蔽softmax 之后与 au.AdditiveAttention 的 attention_weights 一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _additive_scores_steps(student):
    name = "additive_scores"
    attention = AdditiveAttention(key_size=3, query_size=2, num_hiddens=4, dropout=0).eval()
    W_q, W_k, w_v = attention.W_q, attention.W_k, attention.w_v
    queries, keys = _tensor([[[1., 0.], [0., 2.]]]), _tensor([[[1., 0., 1.], [0., 1., -1.]]])  # L = S = 2
    example = (f"queries = {_fmt(queries)}，keys = {_fmt(keys)}；W_q、W_k、w_v 取自 "
               "au.AdditiveAttention(key_size=3, query_size=2, num_hiddens=4, dropout=0)（固定种子）")

    def variant(**kwargs):
        return _additive_variant(queries, keys, W_q, W_k, w_v, **kwargs)

    expected = variant()
    got = _call(student, queries, keys, W_q, W_k, w_v, example=example, name=name)
    elementwise = w_v(torch.tanh(W_q(queries) + W_k(keys)))    # pairs (l, l) only: (B, L, 1)
    _compare(got, expected, example, known=[
        _Known("not-broadcast", "只把第 l 个查询和第 l 个键配了对（逐元素相加），没有让每个查询遇到每个键",
               elementwise.squeeze(-1), "queries.unsqueeze(2) + keys.unsqueeze(1)：(B, L, 1, h) + (B, 1, S, h) "
               "-> (B, L, S, h)。这里 L = S，所以没有报错。"),
        _Known("not-broadcast", "只把第 l 个查询和第 l 个键配了对（逐元素相加），没有让每个查询遇到每个键",
               elementwise, "queries.unsqueeze(2) + keys.unsqueeze(1)：(B, L, 1, h) + (B, 1, S, h) -> (B, L, S, h)。"),
        _Known("kept-last-dim", "形状多了最后一维 (B, L, S, 1)：w_v 的输出还要去掉最后一维",
               expected[..., None], "w_v(features).squeeze(-1)。"),
        _Known("no-tanh", "没有 tanh：分数成了 W_q q 与 W_k k 的线性函数", variant(tanh=lambda x: x),
               "没有 tanh，w_vᵀ(W_q q + W_k k) = w_vᵀW_q q + w_vᵀW_k k，第一项在 softmax 里被消掉，"
               "权重就与查询无关了。"),
        _Known("w_v-before-tanh", "先乘 w_v 再取 tanh，顺序反了", variant(w_v_first=True),
               "a(q, k) = w_vᵀ tanh(W_q q + W_k k)：tanh 在里面。"),
        _Known("tanh-apart", "对 W_q q 和 W_k k 分别取 tanh 再相加：tanh 应作用在它们的和上",
               variant(apart=True), "先相加，再 tanh：tanh(W_q q + W_k k)。"),
        _Known("returns-weights", "返回的是 softmax 之后的权重，不是分数", F.softmax(expected, dim=-1),
               "评分函数只给分数；softmax（以及掩蔽）由 masked_softmax 来做。"),
        _Known("transposed", "分数转置了：第 s 行第 l 列放的是查询 l 与键 s 的分数",
               expected.transpose(1, 2), "queries.unsqueeze(2) + keys.unsqueeze(1)：查询在第 1 维，键在第 2 维。"),
    ], hint="a(q, k) = w_vᵀ tanh(W_q q + W_k k)，逐步打印形状。")
    queries, keys, valid_lens = _seeded(2, 3, 2, seed=19), _seeded(2, 5, 3, seed=20), torch.tensor([2, 5])
    example = "queries (2, 3, 2)、keys (2, 5, 3)（固定种子的随机数；L ≠ S）"
    got = _compare(_call(student, queries, keys, W_q, W_k, w_v, example=example, name=name),
                   _additive_variant(queries, keys, W_q, W_k, w_v), example)
    attention(queries, keys, torch.zeros(2, 5, 1), valid_lens)  # the module's weights for these layers
    _compare_builtin(masked_softmax(got, valid_lens), attention.attention_weights, example,
                     "au.AdditiveAttention（被掩蔽softmax 之后的权重）")


def _bahdanau_variant(decoder, X_t, state, query_layer=-1, query_from_encoder=False,
                      use_lens=True, context_first=True):
    """One step of a Seq2SeqAttentionDecoder with the knobs the known mistakes
    turn -> logits (B, vocab), the GRU's output (B, h), attention weights (B, 1, S)."""
    enc_outputs, hidden_state, enc_valid_lens = state
    query = (enc_outputs[:, -1:] if query_from_encoder
             else hidden_state[query_layer].unsqueeze(1))      # (B, 1, h)
    context = decoder.attention(query, enc_outputs, enc_outputs,
                                enc_valid_lens if use_lens else None)  # (B, 1, h)
    x = decoder.embedding(X_t).unsqueeze(1)                    # (B, 1, embed)
    x = torch.cat((context, x) if context_first else (x, context), dim=-1)
    out, hidden_state = decoder.rnn(x.permute(1, 0, 2), hidden_state)  # (1, B, h)
    return decoder.dense(out[0]), out[0], decoder.attention.attention_weights


def check_bahdanau_step(bahdanau_step):
    """Check ``bahdanau_step(decoder, X_t, state)`` and print a verdict.

    One step of an ``au.Seq2SeqAttentionDecoder`` written from its parts
    (``decoder.attention``, ``.embedding``, ``.rnn``, ``.dense``): X_t (B,)
    token indices, state ``[enc_outputs (B, S, h), hidden_state
    (num_layers, B, h), enc_valid_lens (B,)]`` -> ``(logits (B, vocab_size),
    new_state)`` with the new state in the same form. The query is the
    previous top-layer hidden state. The attention weights the step leaves
    in ``decoder.attention`` are checked first, then the logits against the
    module's ``decoder(X_t[:, None], state)``, one step and three in a row.
    """
    return _run_checker("bahdanau_step", bahdanau_step, _bahdanau_steps, [
        "返回 (logits (B, vocab_size), 新状态)，新状态仍是 [enc_outputs, hidden_state, enc_valid_lens]",
        "注意力权重：查询是上一步解码器最顶层的隐状态，编码器的填充位置权重为 0",
        "上下文变量在嵌入之前拼接；连续走 3 步，每一步的上下文都随新的隐状态更新",
        f"数值：与 au.Seq2SeqAttentionDecoder 一次解码一步、三步的输出一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _bahdanau_steps(student):
    name = "bahdanau_step"
    decoder = Seq2SeqAttentionDecoder(vocab_size=6, embed_size=3, num_hiddens=4, num_layers=2).eval()
    for parameter in decoder.attention.parameters():
        parameter.mul_(3)                                      # sharper weights: mistakes show in them
    enc_outputs, hidden_state = 2 * _seeded(2, 3, 4, seed=21), _seeded(2, 2, 4, seed=22)
    enc_valid_lens, X_t = torch.tensor([2, 3]), torch.tensor([1, 4])
    inputs = ("decoder = au.Seq2SeqAttentionDecoder(vocab_size=6, embed_size=3, num_hiddens=4, "
              "num_layers=2)（固定种子），state = [enc_outputs (2, 3, 4)，hidden_state (2, 2, 4)，"
              "enc_valid_lens = [2, 3]]")
    example = inputs + "，X_t = [1, 4]"

    def state():                                               # a fresh copy for every call
        return [enc_outputs.clone(), hidden_state.clone(), enc_valid_lens.clone()]

    def variant(**kwargs):
        return _bahdanau_variant(decoder, X_t, state(), **kwargs)

    decoder.attention.attention_weights = None
    got = _call(student, decoder, X_t, state(), example=example, name=name)
    weights = decoder.attention.attention_weights              # what the student's step attended to
    logits, new_state = _step_result(got, example)
    Y, expected_state = decoder(X_t[:, None], state())         # (B, 1, vocab)
    if weights is not None:
        _compare(weights, decoder.attention.attention_weights, example + "（比较的是注意力权重 (B, 1, S)）", known=[
            _Known("query-bottom-layer", "查询用的是最底层的隐状态 hidden_state[0]，应是最顶层 hidden_state[-1]",
                   variant(query_layer=0)[2], "多层 GRU 的最后一层才是解码器的输出表示：hidden_state[-1]。"),
            _Known("query-from-encoder", "查询用的是编码器最后一步的输出，应是解码器上一步的隐状态",
                   variant(query_from_encoder=True)[2],
                   "每一步的查询都是解码器自己上一步的隐状态，这样每步关注的源词元才会变。"),
            _Known("padding-not-masked", "没有掩蔽编码器的填充：第 0 个序列的第 3 个键（填充）分到了权重",
                   variant(use_lens=False)[2],
                   "decoder.attention(query, enc_outputs, enc_outputs, enc_valid_lens)。"),
        ], hint="查询是 hidden_state[-1].unsqueeze(1)，键和值都是 enc_outputs，并传入 enc_valid_lens。")
    _compare(logits, Y[:, 0], example, known=[
        _Known("concat-order", "上下文变量与嵌入拼接的顺序反了：应是 [上下文, 嵌入]",
               variant(context_first=False)[0],
               "torch.cat((context, embedding), dim=-1)：GRU 的权重按这个顺序训练（与书中一致）。"),
        _Known("no-dense", "返回的是 GRU 的输出，忘了输出层 decoder.dense", variant()[1],
               "logits = decoder.dense(GRU 这一步的输出)。"),
    ], hint="对照 au.Seq2SeqAttentionDecoder.forward 的循环体，一步一步打印形状。")
    new_hidden = _as_tensor(new_state[1], example)
    if new_hidden.shape == hidden_state.shape and torch.allclose(new_hidden, hidden_state):
        raise _Mistake("state-not-updated", "返回的状态里还是旧的隐状态：下一步会用同一个查询，上下文变量就不会更新",
                       example, hint="把 GRU 返回的新隐状态放进新状态：[enc_outputs, new_hidden_state, enc_valid_lens]。")
    _compare(new_hidden, expected_state[1], example, hint="新状态的第二项是 GRU 返回的新隐状态 (num_layers, B, h)。")
    X = torch.tensor([[1, 2, 5], [4, 0, 3]])
    example = inputs + "，X = [[1, 2, 5], [4, 0, 3]]：连续走 3 步，每步把你返回的状态传给下一步"
    current, outputs = state(), []
    for t in range(X.shape[1]):
        logits, current = _step_result(_call(student, decoder, X[:, t], current, example=example, name=name),
                                       example)
        outputs.append(_as_tensor(logits, example))
    _compare(torch.stack(outputs, dim=1), decoder(X, state())[0], example,
             hint="每一步都要把上一步返回的新状态传进来，并用它的隐状态作查询。")


def _step_result(got, example):
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise _Mistake("not-a-pair", "应返回两个值 (logits, new_state)", example,
                       hint="return logits, [enc_outputs, hidden_state, enc_valid_lens]")
    logits, new_state = got
    if not (isinstance(new_state, (tuple, list)) and len(new_state) == 3):
        raise _Mistake("bad-state", "新状态应是 [enc_outputs, hidden_state, enc_valid_lens] 三项", example,
                       hint="与 decoder.init_state 返回的形式相同，下一步才能接着用。")
    return logits, new_state


# ---- Deck 07: AddNorm (post-norm) and pre-norm ---------------------------

def _normalise_over(Z, dims, norm):
    """Standardise Z over ``dims`` (the biased variance, as LayerNorm), then
    apply norm's weight and bias: the mistake of normalising the wrong axes."""
    mean = Z.mean(dim=dims, keepdim=True)
    variance = Z.var(dim=dims, keepdim=True, unbiased=False)
    return (Z - mean) / torch.sqrt(variance + norm.eps) * norm.weight + norm.bias


def _course_norm(h, seed):
    """A LayerNorm whose weight and bias are not 1 and 0, so using them shows."""
    norm = nn.LayerNorm(h)
    norm.weight.copy_(1 + 0.5 * _seeded(h, seed=seed))
    norm.bias.copy_(0.5 * _seeded(h, seed=seed + 1))
    return norm


def _encoder_layer(norm_first):
    """A tiny nn.TransformerEncoderLayer (h = 4, 2 heads) without dropout."""
    return nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, batch_first=True,
                                      norm_first=norm_first).eval()


def _sublayers(layer):
    """The two sublayers of an nn.TransformerEncoderLayer, as functions of X."""
    def self_attention(X):
        return layer.self_attn(X, X, X, need_weights=False)[0]

    def ffn(X):
        return layer.linear2(layer.activation(layer.linear1(X)))
    return self_attention, ffn


def check_add_norm(add_norm):
    """Check ``add_norm(X, Y, norm, dropout)`` and print a verdict.

    Post-norm, as the paper and ``au.AddNorm``: ``norm(X + dropout(Y))``,
    X the block's input and Y its sublayer's output, both (B, n, h);
    ``norm`` an ``nn.LayerNorm(h)``, ``dropout`` an ``nn.Dropout``. Compared
    with ``au.AddNorm`` and, chained twice, with
    ``nn.TransformerEncoderLayer(norm_first=False)``.
    """
    return _run_checker("add_norm", add_norm, _add_norm_steps, [
        "先相加（残差连接），再层规范化：norm(X + dropout(Y))；用了 norm 自己的 weight 与 bias",
        "层规范化在每个位置自己的 h 个特征上做（不是在批量或位置上）",
        "dropout 作用在子层的输出 Y 上，不作用在 X 上，也不在规范化之后；没有改动 X、Y",
        f"数值：与 au.AddNorm、nn.TransformerEncoderLayer(norm_first=False) 一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _add_norm_steps(student):
    name = "add_norm"
    norm, keep_all = _course_norm(3, seed=23), nn.Dropout(0.0)
    X = _tensor([[[1., 2., 0.], [0., -1., 3.]], [[2., 2., 1.], [1., 0., 0.]]])  # (B, n, h) = (2, 2, 3)
    Y = _tensor([[[0., 1., 1.], [2., 0., -1.]], [[1., -1., 0.], [0., 3., 1.]]])
    inputs = f"X = {_fmt(X)}，Y = {_fmt(Y)}，norm = nn.LayerNorm(3)（weight、bias 不是 1 和 0）"
    example = inputs + "，dropout = nn.Dropout(0)"
    got = _call(student, X, Y, norm, keep_all, example=example, name=name)
    _compare(got, norm(X + Y), example, known=[
        _Known("no-residual", "忘了残差连接：只规范化了子层的输出 Y", norm(Y),
               "AddNorm 先把块的输入 X 加回来：norm(X + dropout(Y))。"),
        _Known("no-norm", "只做了相加，没有层规范化", X + Y, "相加之后调用 norm。"),
        _Known("norm-before-add", "先规范化再相加（那是 pre-norm 的位置）：norm 应作用在和上", X + norm(Y),
               "post-norm：norm(X + dropout(Y))。"),
        _Known("norm-before-add", "先规范化再相加：norm 应作用在 X + Y 上", norm(X) + Y,
               "post-norm：norm(X + dropout(Y))。"),
        _Known("norm-over-batch", "在批量维上规范化了（像批量规范化）：层规范化只用每个位置自己的特征",
               _normalise_over(X + Y, (0,), norm), "用 norm（nn.LayerNorm(h)），它在最后一维上求均值和方差。"),
        _Known("norm-over-positions", "在位置维上规范化了：层规范化只用每个位置自己的 h 个特征",
               _normalise_over(X + Y, (1,), norm), "用 norm（nn.LayerNorm(h)），它在最后一维上求均值和方差。"),
        _Known("norm-over-batch", "在批量和位置上一起规范化了（批量规范化的做法）",
               _normalise_over(X + Y, (0, 1), norm), "用 norm（nn.LayerNorm(h)），它在最后一维上求均值和方差。"),
        _Known("norm-over-positions", "把整个句子的 n × h 个数一起规范化了：层规范化只用每个位置自己的特征",
               _normalise_over(X + Y, (1, 2), norm), "用 norm（nn.LayerNorm(h)），它在最后一维上求均值和方差。"),
        _Known("norm-params-ignored", "没有用 norm 的 weight 和 bias（自己写了标准化）",
               F.layer_norm(X + Y, (3,)), "直接调用 norm(...)：学到的缩放和偏移也是层规范化的一部分。"),
        _Known("unbiased-variance", "方差除以了 n-1（std/var 的默认），层规范化除以 n",
               (X + Y - (X + Y).mean(-1, keepdim=True)) / (X + Y).std(-1, keepdim=True) * norm.weight + norm.bias,
               "直接调用 norm(...)；自己写时用 var(unbiased=False)，并加上 eps。"),
    ], hint="post-norm：norm(X + dropout(Y))。")
    drop_all = nn.Dropout(1.0).train()                         # p = 1: dropout(Z) is all zeros
    example = inputs + "，dropout = nn.Dropout(1.0)（训练模式：全部丢弃，dropout(Z) 全为 0）"
    got = _call(student, X, Y, norm, drop_all, example=example, name=name)
    _compare(got, norm(X), example, known=[
        _Known("dropout-on-X", "dropout 作用在了 X 上，应作用在子层的输出 Y 上", norm(Y),
               "残差这条路不做 dropout：norm(X + dropout(Y))。"),
        _Known("no-dropout", "没有用 dropout：训练时子层的输出要先经过 dropout", norm(X + Y),
               "norm(X + dropout(Y))。"),
        _Known("dropout-after-norm", "dropout 放在了规范化之后，应作用在 Y 上", torch.zeros_like(X),
               "norm(X + dropout(Y))。"),
    ])
    before, example = (X.clone(), Y.clone()), inputs + "，dropout = nn.Dropout(0)"
    _call(student, X, Y, norm, keep_all, example=example, name=name, copy=False)
    _check_unchanged(torch.cat(before), torch.cat([X, Y]), example,
                     "X += ... 会改写调用者的张量：写成 Z = X + dropout(Y)。")
    X, Y = _seeded(2, 5, 6, seed=25), _seeded(2, 5, 6, seed=26)
    example = "X、Y 形状 (2, 5, 6)（固定种子的随机数），与 au.AddNorm([6], dropout=0) 对照"
    module = AddNorm([6], 0).eval()
    norm = _course_norm(6, seed=27)
    module.ln.load_state_dict(norm.state_dict())
    _compare(_call(student, X, Y, norm, keep_all, example=example, name=name), module(X, Y), example)
    layer = _encoder_layer(norm_first=False)
    self_attention, ffn = _sublayers(layer)
    X = _seeded(2, 3, 4, seed=28)
    example = "X (2, 3, 4)，两次 add_norm 组成一个编码器层，与 nn.TransformerEncoderLayer(norm_first=False) 对照"
    Z = _call(student, X, self_attention(X), layer.norm1, keep_all, example=example, name=name)
    Z = _as_tensor(Z, example)
    got = _as_tensor(_call(student, Z, ffn(Z), layer.norm2, keep_all, example=example, name=name), example)
    _compare_builtin(got, layer(X), example, "nn.TransformerEncoderLayer(norm_first=False)")


def check_pre_norm(pre_norm):
    """Check ``pre_norm(X, sublayer, norm)`` and print a verdict.

    Pre-norm: ``X + sublayer(norm(X))`` -- the residual path stays
    un-normalised. X (B, n, h), ``sublayer`` a function or module
    (B, n, h) -> (B, n, h), ``norm`` an ``nn.LayerNorm(h)``. Compared,
    chained twice, with ``nn.TransformerEncoderLayer(norm_first=True)``.
    """
    return _run_checker("pre_norm", pre_norm, _pre_norm_steps, [
        "X + sublayer(norm(X))：先规范化再进子层，残差这条路不规范化，和也不再规范化",
        "没有改动 X",
        f"数值：两次 pre_norm 组成的编码器层与 nn.TransformerEncoderLayer(norm_first=True) 一致（误差 ≤ {_TOLERANCE_TEXT}）"])


def _pre_norm_steps(student):
    name = "pre_norm"
    norm, sublayer = _course_norm(3, seed=29), nn.Linear(3, 3)
    X = _tensor([[[1., 2., 0.], [0., -1., 3.]], [[2., 2., 1.], [1., 0., 0.]]])  # (2, 2, 3)
    example = (f"X = {_fmt(X)}，sublayer = nn.Linear(3, 3)（固定种子），"
               "norm = nn.LayerNorm(3)（weight、bias 不是 1 和 0）")
    got = _call(student, X, sublayer, norm, example=example, name=name)
    _compare(got, X + sublayer(norm(X)), example, known=[
        _Known("post-norm", "写成了 post-norm：norm(X + sublayer(X))", norm(X + sublayer(X)),
               "pre-norm 把规范化移到子层之前：X + sublayer(norm(X))。"),
        _Known("norm-on-sum", "在和上又做了一次规范化：残差之后不再规范化", norm(X + sublayer(norm(X))),
               "X + sublayer(norm(X))：残差这条路从头到尾不经过规范化，梯度直通。"),
        _Known("normalised-residual", "残差加回来的是规范化之后的 X，应加原来的 X", norm(X) + sublayer(norm(X)),
               "Z = norm(X) 只送进子层；残差加的是 X 本身。"),
        _Known("no-residual", "忘了残差连接：只返回了 sublayer(norm(X))", sublayer(norm(X)),
               "X + sublayer(norm(X))。"),
        _Known("no-norm", "没有规范化：X + sublayer(X)", X + sublayer(X), "子层的输入是 norm(X)。"),
    ], hint="pre-norm：X + sublayer(norm(X))。")
    before = X.clone()
    _call(student, X, sublayer, norm, example=example, name=name, copy=False)
    _check_unchanged(before, X, example, "X += ... 会改写调用者的张量：写成 return X + sublayer(norm(X))。")
    layer = _encoder_layer(norm_first=True)
    self_attention, ffn = _sublayers(layer)
    X = _seeded(2, 3, 4, seed=30)
    example = "X (2, 3, 4)，两次 pre_norm 组成一个编码器层，与 nn.TransformerEncoderLayer(norm_first=True) 对照"
    Z = _as_tensor(_call(student, X, self_attention, layer.norm1, example=example, name=name), example)
    got = _as_tensor(_call(student, Z, ffn, layer.norm2, example=example, name=name), example)
    _compare(got, layer(X), example)
