"""The self-check exercises (au.check_<name>): every diagnosis is reachable and named.

For each checker there is a catalogue of wrong implementations, written the
way a student would write them (plain torch, never the checker's own
helpers), the book's formulation among them where it has a defect. Each must
receive its own diagnosis code; the module's implementation must pass; a stub
that raises NotImplementedError gets one short deterministic line; an
exception shows the student's own line, not a traceback; every check is fast,
deterministic, and leaves the caller's random stream alone.
"""

import math
import re
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attention_utils as au
import book_reference as book

pytestmark = pytest.mark.filterwarnings("error")   # a warning would be stored in a deck


# --------------------------------------------------------------- deck 01

def pooling(query, keys, values):
    weights = F.softmax(keys @ query, dim=0)                   # (S,)
    return weights @ values


def pooling_manual_stable(query, keys, values):
    scores = keys @ query
    exp = torch.exp(scores - scores.max())
    return (exp / exp.sum()) @ values


def softmax_manual(x):
    exp = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return exp / exp.sum(dim=-1, keepdim=True)


def softmax_zero_rows(x):
    """Stable, and an all -inf row becomes zeros instead of NaN."""
    top = x.max(dim=-1, keepdim=True).values
    exp = torch.exp(x - torch.where(torch.isinf(top), torch.zeros_like(top), top))
    return exp / exp.sum(dim=-1, keepdim=True).clamp(min=1e-30)


def softmax_in_place(x):
    x -= x.max(dim=-1, keepdim=True).values
    exp = torch.exp(x)
    return exp / exp.sum(dim=-1, keepdim=True)


def softmax_global_max(x):
    exp = torch.exp(x - x.max())
    return exp / exp.sum(dim=-1, keepdim=True)


def softmax_naive(x):
    exp = torch.exp(x)
    return exp / exp.sum(dim=-1, keepdim=True)


# --------------------------------------------------------------- deck 02

def nw(queries, keys, values, width):
    weights = F.softmax(-((queries[:, None] - keys) / width) ** 2 / 2, dim=-1)  # (n, m)
    return (weights * values).sum(dim=-1)


def nw_module(queries, keys, values, width):
    """The module's two implementations, one per key shape."""
    if keys.dim() == 1:
        return au.nw_kernel_regression(queries, keys, values, width)[0]
    model = au.NWKernelRegression()
    with torch.no_grad():
        model.w.fill_(1 / width)
    return model(queries, keys, values)


def nw_with(score, dim=-1, normalise=True, pool_keys=False):
    def regression(queries, keys, values, width):
        scores = score(queries[:, None] - keys, width)
        weights = F.softmax(scores, dim=dim) if normalise else torch.exp(scores)
        return (weights * (keys if pool_keys else values)).sum(dim=-1)
    return regression


def nw_book(queries, keys, values, width):
    """The book's non-parametric cell: no width at all."""
    X_repeat = queries.repeat_interleave(keys.shape[-1]).reshape((-1, keys.shape[-1]))
    attention_weights = F.softmax(-(X_repeat - keys) ** 2 / 2, dim=1)
    return torch.matmul(attention_weights, values)


def nw_matmul(queries, keys, values, width):
    weights = F.softmax(-((queries[:, None] - keys[None, :]) / width) ** 2 / 2, dim=-1)
    return weights @ values                                    # only for keys (m,)


def loo_loop(x):
    return torch.stack([torch.cat([x[:i], x[i + 1:]]) for i in range(len(x))])


def loo_book(x):
    n = x.shape[0]
    X_tile = x.repeat((n, 1))
    return X_tile[(1 - torch.eye(n)).type(torch.bool)].reshape((n, -1))


def loo_drop_last(x):
    return torch.stack([torch.cat([x[:i], x[i:-1]]) for i in range(len(x))])


def loo_neighbour(x):
    n = len(x)
    rows = x.repeat(n, 1)
    for i in range(n):
        rows[i, i] = x[i - 1]                                  # "replace myself by my neighbour"
    return rows[:, :-1]


def loo_roll(x):
    return torch.stack([torch.roll(x, -i - 1)[:-1] for i in range(len(x))])


def loo_by_value(x):
    return torch.stack([x[x != v] for v in x])


# --------------------------------------------------------------- deck 03

def masked_softmax_student(X, valid_lens):
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]                       # (B, 1): the same for every query
    keep = torch.arange(X.shape[-1]) < valid_lens[..., None]   # (B, 1 or L, S)
    weights = F.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def masked_with(fill=float("-inf"), compare=torch.lt, per_query=False, dim=-1, fix="where",
                in_place=False, assign=False, additive=False):
    """A student's masked softmax, with the mistake chosen by the arguments."""
    def masked_softmax(X, valid_lens):
        if valid_lens is None:
            return F.softmax(X, dim=dim)
        B, L, S = X.shape
        if valid_lens.dim() == 1:
            valid_lens = valid_lens.repeat(L) if per_query else valid_lens.repeat_interleave(L)
        keep = compare(torch.arange(S)[None, :], valid_lens.reshape(-1)[:, None])  # (B*L, S)
        if in_place or assign:
            scores = X if in_place else X.clone()
            flat = scores.reshape(-1, S)                       # a view: writes go into scores
            flat[~keep] = fill
        elif additive:                                         # X + (0 or -inf)
            scores = X + torch.zeros(B * L, S).masked_fill(~keep, fill).reshape(B, L, S)
        else:
            scores = X.reshape(-1, S).masked_fill(~keep, fill).reshape(B, L, S)
        weights = F.softmax(scores, dim=dim)
        empty = (valid_lens.reshape(B, L) == 0)[..., None]
        if fix == "where":
            return torch.where(empty, torch.zeros_like(weights), weights)
        if fix == "multiply":
            return weights * ~empty
        return weights
    return masked_softmax


def sdpa(queries, keys, values, valid_lens=None):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])  # (B, L, S)
    return au.masked_softmax(scores, valid_lens) @ values


def sdpa_with(scale=lambda E, Ev: 1 / math.sqrt(E), dim=-1, transpose=True, use_lens=True,
              return_weights=False):
    def attention(queries, keys, values, valid_lens=None):
        E, Ev = queries.shape[-1], values.shape[-1]
        scores = queries @ (keys.transpose(1, 2) if transpose else keys) * scale(E, Ev)
        if use_lens and valid_lens is not None:
            weights = au.masked_softmax(scores, valid_lens)
        else:
            weights = F.softmax(scores, dim=dim)
        return weights if return_weights else weights @ values
    return attention


def book_dot_product(queries, keys, values, valid_lens=None):
    return book.DotProductAttention(0)(queries, keys, values, valid_lens)


# --------------------------------------------------------------- deck 04

def qkv_student(X, num_heads):
    B, n, hd = X.shape
    X = X.reshape(B, n, num_heads, hd // num_heads).permute(0, 2, 1, 3)  # (B, H, n, d)
    return X.reshape(B * num_heads, n, -1)


def output_student(X, num_heads):
    BH, n, d = X.shape
    X = X.reshape(BH // num_heads, num_heads, n, d).permute(0, 2, 1, 3)  # (B, n, H, d)
    return X.reshape(BH // num_heads, n, num_heads * d)


def qkv_4d(X, num_heads):
    B, n, hd = X.shape
    return X.reshape(B, n, num_heads, hd // num_heads).permute(0, 2, 1, 3)


def qkv_no_permute(X, num_heads):
    B, n, hd = X.shape
    return X.reshape(B * num_heads, n, hd // num_heads)


def qkv_interleaved(X, num_heads):
    B, n, hd = X.shape
    X = X.reshape(B, n, hd // num_heads, num_heads).permute(0, 3, 1, 2)
    return X.reshape(B * num_heads, n, -1)


def qkv_head_major(X, num_heads):
    B, n, hd = X.shape
    X = X.reshape(B, n, num_heads, hd // num_heads).permute(2, 0, 1, 3)  # (H, B, n, d)
    return X.reshape(B * num_heads, n, -1)


def output_no_permute(X, num_heads):
    BH, n, d = X.shape
    return X.reshape(BH // num_heads, n, num_heads * d)


def output_head_major(X, num_heads):
    BH, n, d = X.shape
    X = X.reshape(num_heads, BH // num_heads, n, d).permute(1, 2, 0, 3)
    return X.reshape(BH // num_heads, n, -1)


def output_interleaved(X, num_heads):
    BH, n, d = X.shape
    X = X.reshape(BH // num_heads, num_heads, n, d).permute(0, 2, 3, 1)
    return X.reshape(BH // num_heads, n, -1)


def output_two_steps(X, num_heads):
    X = X.reshape(-1, num_heads, 2, X.shape[2])                 # n written as 2
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def multihead(mha, queries, keys, values, valid_lens):
    q = au.transpose_qkv(mha.W_q(queries), mha.num_heads)      # (B*H, L, d)
    k = au.transpose_qkv(mha.W_k(keys), mha.num_heads)
    v = au.transpose_qkv(mha.W_v(values), mha.num_heads)
    if valid_lens is not None:
        valid_lens = torch.repeat_interleave(valid_lens, mha.num_heads, dim=0)
    output = mha.attention(q, k, v, valid_lens)                # (B*H, L, d)
    return mha.W_o(au.transpose_output(output, mha.num_heads))


def multihead_with(split=True, permute=True, repeat="interleave", output_projection=True,
                   key_projection="W_k"):
    def forward(mha, queries, keys, values, valid_lens):
        H = mha.num_heads

        def heads(X):
            if not split:
                return X
            if permute:
                return au.transpose_qkv(X, H)
            return X.reshape(X.shape[0] * H, X.shape[1], -1)
        q = heads(mha.W_q(queries))
        k = heads(getattr(mha, key_projection)(keys))
        v = heads(mha.W_v(values))
        if valid_lens is not None and split and repeat == "interleave":
            valid_lens = valid_lens.repeat_interleave(H, dim=0)
        elif valid_lens is not None and split and repeat == "flatten":   # forgot dim=0
            valid_lens = valid_lens.repeat_interleave(H)
        elif valid_lens is not None and split and repeat == "repeat":
            valid_lens = valid_lens.repeat(H, *([1] * (valid_lens.dim() - 1)))
        elif repeat == "drop":
            valid_lens = None
        output = mha.attention(q, k, v, valid_lens)
        if split:
            output = (au.transpose_output(output, H) if permute
                      else output.reshape(queries.shape[0], queries.shape[1], -1))
        return mha.W_o(output) if output_projection else output
    return forward


# --------------------------------------------------------------- deck 05

def encoding(num_steps, num_hiddens):
    position = torch.arange(num_steps, dtype=torch.float32)[:, None]
    angles = position / 10000 ** (torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
    P = torch.zeros(num_steps, num_hiddens)
    P[:, 0::2] = torch.sin(angles)
    P[:, 1::2] = torch.cos(angles[:, :num_hiddens // 2])
    return P


def encoding_with(base=10000, exponent=2, start=0, swap=False, concatenate=False, batch=False):
    def positional_encoding(num_steps, num_hiddens):
        position = torch.arange(start, start + num_steps, dtype=torch.float32)[:, None]
        i = torch.arange(0, num_hiddens, 2, dtype=torch.float32) / 2       # pair index
        angles = position / base ** (exponent * i / num_hiddens)
        first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
        if concatenate:
            P = torch.cat([first(angles), second(angles)], dim=1)
        else:
            P = torch.zeros(num_steps, num_hiddens)
            P[:, 0::2], P[:, 1::2] = first(angles), second(angles)
        return P[None] if batch else P
    return positional_encoding


def encoding_book(num_steps, num_hiddens):
    P = torch.zeros((1, num_steps, num_hiddens))
    X = torch.arange(num_steps, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
    P[:, :, 0::2] = torch.sin(X)
    P[:, :, 1::2] = torch.cos(X)
    return P[0]


def causal(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def causal_module(num_steps):
    return au.valid_lens_to_mask(au.causal_valid_lens(1, num_steps), num_steps, num_steps)[0]


# --------------------------------------------------------------- deck 06

def additive(queries, keys, W_q, W_k, w_v):
    features = torch.tanh(W_q(queries).unsqueeze(2) + W_k(keys).unsqueeze(1))   # (B, L, S, h)
    return w_v(features).squeeze(-1)                                          # (B, L, S)


def additive_book(queries, keys, W_q, W_k, w_v):
    queries, keys = W_q(queries), W_k(keys)
    features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
    return w_v(features).squeeze(-1)


def additive_with(pairs="all", tanh=True, w_v_inside=False, apart=False, squeeze=True,
                  softmax=False, transpose=False):
    def additive_scores(queries, keys, W_q, W_k, w_v):
        q, k = W_q(queries), W_k(keys)
        if apart:
            q, k = torch.tanh(q), torch.tanh(k)
        if pairs == "elementwise":
            features = q + k
        elif transpose:
            features = q.unsqueeze(1) + k.unsqueeze(2)
        else:
            features = q.unsqueeze(2) + k.unsqueeze(1)
        if w_v_inside:
            scores = torch.tanh(w_v(features))
        else:
            scores = w_v(torch.tanh(features) if tanh and not apart else features)
        scores = scores.squeeze(-1) if squeeze else scores
        return F.softmax(scores, dim=-1) if softmax else scores
    return additive_scores


def bahdanau(decoder, X_t, state):
    enc_outputs, hidden_state, enc_valid_lens = state
    query = hidden_state[-1].unsqueeze(1)                      # (B, 1, h)
    context = decoder.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
    x = torch.cat((context, decoder.embedding(X_t).unsqueeze(1)), dim=-1)  # (B, 1, h + embed)
    out, hidden_state = decoder.rnn(x.permute(1, 0, 2), hidden_state)
    return decoder.dense(out[0]), [enc_outputs, hidden_state, enc_valid_lens]


def bahdanau_module(decoder, X_t, state):
    Y, state = decoder(X_t[:, None], state)
    return Y[:, 0], state


def bahdanau_with(layer=-1, query="decoder", lens=True, context_first=True, dense=True,
                  update=True, pair=True, state_items=3):
    def step(decoder, X_t, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        q = enc_outputs[:, -1:] if query == "encoder" else hidden_state[layer].unsqueeze(1)
        context = decoder.attention(q, enc_outputs, enc_outputs, enc_valid_lens if lens else None)
        embedded = decoder.embedding(X_t).unsqueeze(1)
        x = torch.cat((context, embedded) if context_first else (embedded, context), dim=-1)
        out, new_hidden = decoder.rnn(x.permute(1, 0, 2), hidden_state)
        logits = decoder.dense(out[0]) if dense else out[0]
        new_state = [enc_outputs, new_hidden if update else hidden_state, enc_valid_lens][:state_items]
        return (logits, new_state) if pair else logits
    return step


# --------------------------------------------------------------- deck 07

def add_norm(X, Y, norm, dropout):
    return norm(X + dropout(Y))


def add_norm_module(X, Y, norm, dropout):
    block = au.AddNorm(norm.normalized_shape, dropout.p)
    block.ln, block.dropout = norm, dropout
    return block(X, Y)


def add_norm_over(dims):
    def add_norm(X, Y, norm, dropout):
        Z = X + dropout(Y)
        mean, var = Z.mean(dim=dims, keepdim=True), Z.var(dim=dims, keepdim=True, unbiased=False)
        return (Z - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias
    return add_norm


def add_norm_std(X, Y, norm, dropout):
    Z = X + dropout(Y)
    return (Z - Z.mean(-1, keepdim=True)) / Z.std(-1, keepdim=True) * norm.weight + norm.bias


def add_norm_in_place(X, Y, norm, dropout):
    X += dropout(Y)
    return norm(X)


def pre_norm(X, sublayer, norm):
    return X + sublayer(norm(X))


def pre_norm_in_place(X, sublayer, norm):
    X += sublayer(norm(X))
    return X


# --------------------------------------------------------------- the catalogue

# checker -> (the implementations that must pass, {diagnosis: wrong implementation})
CATALOGUE = {
    "check_attention_pooling": ([pooling, pooling_manual_stable], {
        "returns-weights": lambda q, k, v: F.softmax(k @ q, dim=0),
        "no-softmax": lambda q, k, v: (k @ q) @ v,
        "not-normalised": lambda q, k, v: torch.exp(k @ q) @ v,
        "plain-average": lambda q, k, v: v.mean(dim=0),
        "keys-not-transposed": lambda q, k, v: F.softmax(q @ k, dim=0) @ v,
        "keys-as-values": lambda q, k, v: F.softmax(k @ q, dim=0) @ k,
        "overflow": lambda q, k, v: (torch.exp(k @ q) / torch.exp(k @ q).sum()) @ v,
        "raised": lambda q, k, v: torch.mm(k, q) @ v,                 # mm needs 2-D
    }),
    "check_softmax": ([softmax_manual, softmax_zero_rows, lambda x: F.softmax(x, dim=-1)], {
        "wrong-axis": lambda x: F.softmax(x, dim=0),
        "not-normalised": torch.exp,
        "global-normalisation": lambda x: torch.exp(x) / torch.exp(x).sum(),
        "axis-hardcoded": lambda x: F.softmax(x, dim=1),
        "overflow": softmax_naive,
        "global-max": softmax_global_max,
        "all-masked-row": lambda x: F.softmax(torch.nan_to_num(x, neginf=-1e9), dim=-1),
        "modifies-input": softmax_in_place,
        "not-finite": lambda x: softmax_manual(x) / 0,
        "returned-none": lambda x: None,
        "not-a-tensor": lambda x: "softmax",
    }),
    "check_nw_regression": ([nw, nw_module], {
        "returns-weights": lambda q, k, v, w: F.softmax(-((q[:, None] - k) / w) ** 2 / 2, dim=-1),
        "returned-tuple": au.nw_kernel_regression,                   # returns (predictions, weights)
        "softmax-over-queries": nw_with(lambda d, w: -(d / w) ** 2 / 2, dim=0),
        "not-squared": nw_with(lambda d, w: -torch.abs(d / w) / 2),
        "wrong-sign": nw_with(lambda d, w: (d / w) ** 2 / 2),
        "width-multiplied": nw_with(lambda d, w: -(d * w) ** 2 / 2),
        "missing-half": nw_with(lambda d, w: -(d / w) ** 2),
        "width-not-squared": nw_with(lambda d, w: -d ** 2 / w / 2),
        "width-ignored": nw_book,                                     # the book's cell has no width
        "not-normalised": nw_with(lambda d, w: -(d / w) ** 2 / 2, normalise=False),
        "keys-as-values": nw_with(lambda d, w: -(d / w) ** 2 / 2, pool_keys=True),
        "per-query-keys": nw_matmul,
    }),
    "check_leave_one_out": ([loo_loop, loo_book, au.leave_one_out], {
        "self-included": lambda x: x.repeat(len(x), 1),
        "transposed": lambda x: loo_loop(x).T,
        "wrong-shape": lambda x: x[1:],
        "keeps-self": loo_drop_last,
        "wrong-points": loo_neighbour,
        "order-scrambled": loo_roll,
        "drops-by-value": loo_by_value,
    }),
    "check_masked_softmax": ([au.masked_softmax, masked_softmax_student, masked_with()], {
        "uniform-empty-row": book.masked_softmax,                     # the book's formulation
        "wrong-axis": masked_with(dim=1),
        "ignores-valid-lens": lambda X, valid_lens: F.softmax(X, dim=-1),
        "lens-per-query": masked_with(per_query=True),
        "off-by-one": masked_with(compare=torch.le),
        "mask-flipped": masked_with(compare=torch.ge),
        "nan-empty-row": masked_with(fix=None),
        "modifies-input": masked_with(in_place=True),                  # the book's view write, -inf fill
        "float16-overflow": masked_with(fill=-1e6),
        "float16-nan": masked_with(fill=-1e6, assign=True, fix="multiply"),
        "leaks-below-fill": masked_with(fill=-1e4),                    # "-1e6 overflowed, so -1e4"
        "nan-gradient": masked_with(additive=True),                    # forward right, backward NaN
    }),
    "check_scaled_dot_product": ([sdpa, sdpa_with(), au.DotProductAttention(0)], {
        "uniform-empty-row": book_dot_product,                        # the book's masked_softmax inside
        "returns-weights": sdpa_with(return_weights=True),
        "no-scaling": sdpa_with(scale=lambda E, Ev: 1.0),
        "divide-by-E": sdpa_with(scale=lambda E, Ev: 1 / E),
        "scale-multiplied": sdpa_with(scale=lambda E, Ev: math.sqrt(E)),
        "wrong-size-scale": sdpa_with(scale=lambda E, Ev: 1 / math.sqrt(Ev)),
        "wrong-axis": sdpa_with(dim=1),
        "keys-not-transposed": sdpa_with(transpose=False),
        "ignores-valid-lens": sdpa_with(use_lens=False),
    }),
    "check_transpose_qkv": ([(qkv_student, output_student), (au.transpose_qkv, au.transpose_output),
                             (book.transpose_qkv, book.transpose_output)], {
        "forgot-fold": (qkv_4d, output_student),
        "heads-across-positions": (qkv_no_permute, output_student),
        "heads-interleaved": (qkv_interleaved, output_student),
        "head-major": (qkv_head_major, output_student),
        "output-heads-across-positions": (qkv_student, output_no_permute),
        "output-head-major": (qkv_student, output_head_major),
        "output-interleaved": (qkv_student, output_interleaved),
        "round-trip": (qkv_student, output_two_steps),
    }),
    "check_multihead_forward": ([multihead, multihead_with(), lambda mha, q, k, v, lens: mha(q, k, v, lens)], {
        "no-output-projection": multihead_with(output_projection=False),
        "no-head-split": multihead_with(split=False),
        "heads-across-positions": multihead_with(permute=False),
        "keys-projected-with-W_q": multihead_with(key_projection="W_q"),
        "repeat-not-interleave": multihead_with(repeat="repeat"),
        "ignores-valid-lens": multihead_with(repeat="drop"),
        "lens-not-repeated": multihead_with(repeat="none"),
        "lens-flattened": multihead_with(repeat="flatten"),
    }),
    "check_positional_encoding": ([encoding, lambda n, d: au.PositionalEncoding(d, 0, max_len=n).P[0]], {
        "odd-hiddens": encoding_book,                                 # the book's formulation
        "extra-batch-dim": encoding_with(batch=True),
        "sin-cos-swapped": encoding_with(swap=True),
        "exponent-i-over-d": encoding_with(exponent=1),
        "wrong-base": encoding_with(base=1000),
        "positions-from-1": encoding_with(start=1),
        "halves-concatenated": encoding_with(concatenate=True),
    }),
    "check_causal_mask": ([causal, causal_module], {
        "future-allowed": lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)),
        "polarity-flipped": lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1),
        "diagonal-excluded": lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1),
        "off-by-one": lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=1),
        "no-mask": lambda n: torch.ones(n, n, dtype=torch.bool),
        "not-bool": lambda n: torch.tril(torch.ones(n, n)),
        "additive-float-mask": nn.Transformer.generate_square_subsequent_mask,
        "wrong-shape": lambda n: causal(n)[None],
        "wrong-values": lambda n: causal(3),                          # the length written as 3
    }),
    "check_additive_scores": ([additive, additive_book, additive_with()], {
        "not-broadcast": additive_with(pairs="elementwise"),
        "kept-last-dim": additive_with(squeeze=False),
        "no-tanh": additive_with(tanh=False),
        "w_v-before-tanh": additive_with(w_v_inside=True),
        "tanh-apart": additive_with(apart=True),
        "returns-weights": additive_with(softmax=True),
        "transposed": additive_with(transpose=True),
    }),
    "check_bahdanau_step": ([bahdanau, bahdanau_module, bahdanau_with()], {
        "query-bottom-layer": bahdanau_with(layer=0),
        "query-from-encoder": bahdanau_with(query="encoder"),
        "padding-not-masked": bahdanau_with(lens=False),
        "concat-order": bahdanau_with(context_first=False),
        "no-dense": bahdanau_with(dense=False),
        "state-not-updated": bahdanau_with(update=False),
        "not-a-pair": bahdanau_with(pair=False),
        "bad-state": bahdanau_with(state_items=2),
    }),
    "check_add_norm": ([add_norm, add_norm_module], {
        "no-residual": lambda X, Y, norm, dropout: norm(dropout(Y)),
        "no-norm": lambda X, Y, norm, dropout: X + dropout(Y),
        "norm-before-add": lambda X, Y, norm, dropout: X + norm(dropout(Y)),
        "norm-over-batch": add_norm_over((0,)),
        "norm-over-positions": add_norm_over((1,)),
        "norm-params-ignored": lambda X, Y, norm, dropout: F.layer_norm(X + dropout(Y), norm.normalized_shape),
        "unbiased-variance": add_norm_std,
        "dropout-on-X": lambda X, Y, norm, dropout: norm(dropout(X) + Y),
        "no-dropout": lambda X, Y, norm, dropout: norm(X + Y),
        "dropout-after-norm": lambda X, Y, norm, dropout: dropout(norm(X + Y)),
        "modifies-input": add_norm_in_place,
    }),
    "check_pre_norm": ([pre_norm], {
        "post-norm": lambda X, sublayer, norm: norm(X + sublayer(X)),
        "norm-on-sum": lambda X, sublayer, norm: norm(X + sublayer(norm(X))),
        "normalised-residual": lambda X, sublayer, norm: norm(X) + sublayer(norm(X)),
        "no-residual": lambda X, sublayer, norm: sublayer(norm(X)),
        "no-norm": lambda X, sublayer, norm: X + sublayer(X),
        "modifies-input": pre_norm_in_place,
    }),
}
CHECKERS = sorted(CATALOGUE)
FUNCTIONS = {
    "check_attention_pooling": au.check_attention_pooling, "check_softmax": au.check_softmax,
    "check_nw_regression": au.check_nw_regression, "check_leave_one_out": au.check_leave_one_out,
    "check_masked_softmax": au.check_masked_softmax, "check_scaled_dot_product": au.check_scaled_dot_product,
    "check_transpose_qkv": au.check_transpose_qkv, "check_multihead_forward": au.check_multihead_forward,
    "check_positional_encoding": au.check_positional_encoding, "check_causal_mask": au.check_causal_mask,
    "check_additive_scores": au.check_additive_scores, "check_bahdanau_step": au.check_bahdanau_step,
    "check_add_norm": au.check_add_norm, "check_pre_norm": au.check_pre_norm,
}


def run(checker, implementation):
    """Call the checker as a deck cell does; a pair means two functions."""
    arguments = implementation if isinstance(implementation, tuple) else (implementation,)
    return FUNCTIONS[checker](*arguments)


def stub_for(checker):
    def my_function(*args):
        raise NotImplementedError("尚未实现：把这一行换成你的代码")
    return (my_function, my_function) if checker == "check_transpose_qkv" else my_function


def broken_for(checker):
    def broken(*args):
        return 1 / 0
    return (broken, output_student) if checker == "check_transpose_qkv" else broken


WRONG = [(checker, code) for checker in CHECKERS for code in CATALOGUE[checker][1]]


def test_every_deck_has_two_checkers_and_every_checker_a_catalogue():
    assert len(CHECKERS) >= 14
    assert {name for name in au.__all__ if name.startswith("check_")} == set(CHECKERS) == set(FUNCTIONS)
    for checker in CHECKERS:
        specific = set(CATALOGUE[checker][1]) - {"raised", "wrong-shape", "wrong-values", "not-finite",
                                                  "returned-none", "not-a-tensor", "returned-tuple"}
        assert len(specific) >= 4, checker


@pytest.mark.parametrize("checker", CHECKERS)
def test_the_right_implementations_pass(checker, capsys):
    for implementation in CATALOGUE[checker][0]:
        result = run(checker, implementation)
        out = capsys.readouterr().out
        assert result.passed and result.code == "passed", out
        assert bool(result) and out.startswith("✓") and "已验证" in out


@pytest.mark.parametrize("checker, code", WRONG, ids=[f"{c[6:]}-{d}" for c, d in WRONG])
def test_each_wrong_implementation_gets_its_own_diagnosis(checker, code, capsys):
    result = run(checker, CATALOGUE[checker][1][code])
    out = capsys.readouterr().out
    assert result.code == code, out
    assert not result and not result.passed
    assert out.startswith("✗") and len(out.splitlines()) <= 8, out
    assert "Traceback" not in out and " at 0x" not in out
    if code != "raised":
        assert "错在：" in out and "提示：" in out, out


def test_the_book_defects_are_named_as_the_issue_names_them(capsys):
    assert au.check_masked_softmax(book.masked_softmax).code == "uniform-empty-row"
    out = capsys.readouterr().out
    assert "有效长度为 0 的行得到了均匀权重 0.25：它在给填充位置分配注意力" in out
    assert "[[[0.25, 0.25, 0.25, 0.25]]]" in out and "[[[0, 0, 0, 0]]]" in out


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_stub_gets_one_short_line(checker, capsys):
    result = run(checker, stub_for(checker))
    out = capsys.readouterr().out
    assert result.code == "not-implemented"
    assert out == "尚未实现：请先补全 my_function，再运行本单元。\n", out   # the stub's own name
    stub = stub_for(checker)
    anonymous = (lambda *args: stub[0](*args)) if isinstance(stub, tuple) else (lambda *args: stub(*args))
    run(checker, (anonymous, anonymous) if isinstance(stub, tuple) else anonymous)
    name = checker.removeprefix("check_").replace("scaled_dot_product", "scaled_dot_product_attention")
    assert capsys.readouterr().out == f"尚未实现：请先补全 {name}，再运行本单元。\n"   # a lambda: the exercise


@pytest.mark.parametrize("checker", CHECKERS)
def test_an_exception_shows_the_students_line_not_a_traceback(checker, capsys):
    result = run(checker, broken_for(checker))
    out = capsys.readouterr().out
    assert result.code == "raised"
    line = broken_for.__code__.co_firstlineno + 2                   # "return 1 / 0" in this file
    assert f"出错的是你的代码第 {line} 行：return 1 / 0" in out, out
    assert "ZeroDivisionError: division by zero" in out
    assert "Traceback" not in out and len(out.splitlines()) <= 6


@pytest.mark.parametrize("checker", CHECKERS)
def test_each_check_is_fast_deterministic_and_leaves_the_random_stream(checker, capsys):
    right = CATALOGUE[checker][0][0]
    wrong = next(iter(CATALOGUE[checker][1].values()))
    run(checker, right)                                               # warm-up: first calls into torch
    capsys.readouterr()
    state = torch.get_rng_state()
    texts = []
    for _ in range(2):
        start = time.perf_counter()
        run(checker, right)
        run(checker, wrong)
        assert time.perf_counter() - start < 1.0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1]
    assert torch.equal(torch.get_rng_state(), state)


def test_the_checker_follows_the_module(monkeypatch, capsys):
    """A student who edits the module sees the checker change with it."""
    assert au.check_leave_one_out(loo_loop)
    monkeypatch.setattr(au, "leave_one_out", loo_roll)
    assert au.check_leave_one_out(loo_roll).passed
    assert not au.check_leave_one_out(loo_loop).passed
    capsys.readouterr()


def test_pytorch_is_checked_too(monkeypatch, capsys):
    """Where PyTorch has the same computation, a module edited wrongly is caught."""
    scaled = lambda X, valid_lens=None: au.F.softmax(2 * X, dim=-1)   # noqa: E731
    monkeypatch.setattr(au, "masked_softmax", scaled)
    result = au.check_attention_pooling(lambda q, k, v: F.softmax(2 * (k @ q), dim=0) @ v)
    assert result.code == "differs-from-pytorch"
    assert "F.scaled_dot_product_attention" in capsys.readouterr().out


def test_result_repr_is_deterministic_and_jupyter_shows_nothing_more(capsys):
    result = au.check_softmax(softmax_manual)
    assert repr(result) == "CheckResult('softmax', code='passed')"
    assert result._ipython_display_() is None
    capsys.readouterr()


def test_softmax_verdict_names_the_empty_row_choice_without_later_decks_terms(capsys):
    """Deck 01 prints this verdict; valid lengths are only taught in deck 03 (review 01_g)."""
    au.check_softmax(softmax_manual)
    nan_rows = capsys.readouterr().out
    au.check_softmax(softmax_zero_rows)
    zero_rows = capsys.readouterr().out
    assert "全为 -inf 的一行得到 NaN（与 F.softmax 相同）" in nan_rows
    assert "全为 -inf 的一行得到全 0" in zero_rows
    assert "有效长度" not in nan_rows + zero_rows


def test_verdict_states_the_tolerance_the_comparison_uses(capsys):
    """A value off by 2e-5 relative (6e-5 absolute on 3.0) passes, so the verdict may
    not say '误差 ≤ 1e-5' (review 01_h): it states atol + rtol * |expected|."""
    assert au.CHECK_TOLERANCE == 1e-5
    au.check_softmax(lambda x: softmax_manual(x) * (1 + 2e-5))
    out = capsys.readouterr().out
    assert out.startswith("✓ softmax：通过")
    assert "误差 ≤ 1e-5 + 1e-5 × |参考值|" in out


def test_a_non_function_is_a_clear_value_error():
    with pytest.raises(ValueError, match="expected your function .* got str"):
        au.check_softmax("softmax")
    with pytest.raises(ValueError, match="got NoneType"):
        au.check_transpose_qkv(qkv_student, None)


# --------------------------------------------------------------- concept questions (au.quiz)

import base64  # noqa: E402
import json  # noqa: E402

QUESTION = "缩放点积注意力为什么除以 √d，而不是 d？"
OPTIONS = [("让 q·k 的方差回到 1", "q·k 是 d 个乘积之和，方差为 d；除以 √d 方差回到 1。"),
           ("除以 d 会溢出", "除以更大的数不会溢出；分数被压得太小，softmax 接近均匀。"),
           ("为了算得更快", "缩放只多一次乘法，与速度无关。")]


def quiz_bundle(question=QUESTION, options=OPTIONS, answer=0):
    return au.quiz(question, options, answer=answer)._repr_mimebundle_()


def without_scripts(html):
    """What a viewer that strips scripts and styles can show."""
    return re.sub(r"<(script|style)[^>]*>.*?</\1>", "", html, flags=re.S)


def test_quiz_plain_text_shows_question_and_options_but_not_the_answer():
    bundle = quiz_bundle()
    for text in (bundle["text/plain"], without_scripts(bundle["text/html"])):
        assert QUESTION in text and all(option in text for option, _ in OPTIONS)
        assert not any(explanation in text for _, explanation in OPTIONS)
        assert "正确" not in text and "不对" not in text
    assert "A. 让 q·k 的方差回到 1" in bundle["text/plain"]


def test_quiz_key_holds_every_explanation_with_its_verdict_in_words():
    html = quiz_bundle(answer=1)["text/html"]
    payload = re.search(r'<script type="application/json" class="au-quiz-key">(.*?)</script>', html).group(1)
    key = json.loads(base64.b64decode(payload))
    assert key["answer"] == 1
    assert key["explanations"] == [("✓ 正确。" if i == 1 else "✗ 不对。") + explanation
                                   for i, (_, explanation) in enumerate(OPTIONS)]
    assert "正确" not in payload and "\\u" not in payload            # unreadable without decoding


def test_quiz_markup_is_accessible_and_deterministic():
    html = quiz_bundle()["text/html"]
    assert html == quiz_bundle()["text/html"]                          # strict nbval compares it
    assert html.count('<button type="button" class="au-quiz-option" aria-pressed="false">') == 3
    assert 'role="status" aria-live="polite"' in html and 'lang="zh-CN"' in html
    ids = re.findall(r'id="(au-quiz-[0-9a-f]{10})"', html)
    assert ids and f'aria-labelledby="{ids[0]}-q"' in html
    assert ids[0] not in quiz_bundle(question="另一个问题？")["text/html"]  # ids follow the text


def test_quiz_live_widget_explains_the_chosen_option():
    q = au.quiz(QUESTION, OPTIONS, answer=0)
    assert WIDGET_VIEW in q._repr_mimebundle_()
    style, question, *buttons, feedback = q._widget.children
    assert [b.description for b in buttons] == [f"{letter}. {text}" for letter, (text, _) in zip("ABC", OPTIONS)]
    assert feedback.value == ""
    buttons[2].click()
    assert feedback.value.startswith("✗ 不对。") and OPTIONS[2][1] in feedback.value
    assert buttons[2].button_style == "danger" and buttons[2].icon == "times"
    buttons[0].click()
    assert feedback.value.startswith("✓ 正确。") and OPTIONS[0][1] in feedback.value
    assert buttons[0].button_style == "success" and buttons[2].button_style == ""


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("call, message", [
    (lambda: au.quiz("", OPTIONS, 0), "non-empty str"),
    (lambda: au.quiz(QUESTION, OPTIONS[:1], 0), "2 to 6 options, got 1"),
    (lambda: au.quiz(QUESTION, [("A", "")] + OPTIONS, 0), r"option 0 .* pair"),
    (lambda: au.quiz(QUESTION, OPTIONS, 3), "0 to 2, got 3"),
    (lambda: au.quiz(QUESTION, OPTIONS, "A"), "index of the right option"),
])
def test_quiz_bad_input_names_what_was_expected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_offline_quiz_explains_the_clicked_option_in_chromium(tmp_path):
    """The stored HTML alone (no kernel, no network) works with a mouse and a keyboard."""
    browser = pytest.importorskip("slides.browser", reason="slides/browser.py (Playwright)")
    if browser.chromium_path() is None:
        pytest.skip("no Chromium")
    page_file = tmp_path / "quiz.html"
    page_file.write_text(f'<!DOCTYPE html><html lang="zh-CN"><meta charset="utf-8"><body>'
                         f'{quiz_bundle(answer=0)["text/html"]}</body></html>', encoding="utf-8")
    with browser.launch() as context:
        page = context.new_page()
        log = browser.watch(page, ("file://",))
        page.goto(page_file.as_uri())
        feedback = page.locator(".au-quiz-feedback")
        page.locator(".au-quiz-option").nth(1).click()
        assert feedback.inner_text() == "✗ 不对。" + OPTIONS[1][1]
        page.locator(".au-quiz-option").nth(0).focus()
        page.keyboard.press("Space")
        assert feedback.inner_text() == "✓ 正确。" + OPTIONS[0][1]
        pressed = page.eval_on_selector_all(".au-quiz-option", "bs => bs.map(b => b.getAttribute('aria-pressed'))")
        assert pressed == ["true", "false", "false"]
        assert log.external == [] and log.errors == []


def test_load_quizzes_reads_a_decks_questions_by_name(tmp_path):
    path = tmp_path / "quizzes.json"
    path.write_text(json.dumps({
        "why-sqrt-d": {"question": "为什么除以 √d？", "options": [["方差回到 1", "对。"], ["防止溢出", "不对。"]],
                       "answer": 0},
        "polarity": {"question": "True 表示什么？", "options": [["允许", "对。"], ["忽略", "不对。"]], "answer": 0},
    }, ensure_ascii=False), encoding="utf-8")
    quizzes = au.load_quizzes(path)
    assert list(quizzes) == ["why-sqrt-d", "polarity"]
    bundle = quizzes["why-sqrt-d"]._repr_mimebundle_()
    assert "为什么除以 √d" in bundle["text/plain"] and "对。" not in bundle["text/plain"]


def test_load_quizzes_names_a_malformed_question(tmp_path):
    path = tmp_path / "quizzes.json"
    path.write_text(json.dumps({"q": {"question": "?", "options": [["a", "b"], ["c", "d"]]}}), encoding="utf-8")
    with pytest.raises(ValueError, match="exactly the keys question, options, answer"):
        au.load_quizzes(path)


def test_checkers_work_when_a_deck_computes_in_float64():
    """Deck 06 sets torch.set_default_dtype(torch.float64); the checkers' probes stay float32."""
    torch.set_default_dtype(torch.float64)
    try:
        assert au.check_additive_scores(additive)
        assert au.check_bahdanau_step(bahdanau)
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
