"""transpose_qkv, transpose_output and MultiHeadAttention."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import attention_utils as au
import book_reference as book
from unit_support import assert_unchanged, keep_mask, ours_and_book, snapshot


# --------------------------------------------------------------------------
# Folding heads into the batch
# --------------------------------------------------------------------------

def test_transpose_qkv_slices_heads_contiguously():
    B, n, H, d = 2, 3, 4, 5
    X = torch.randn(B, n, H * d)
    folded = au.transpose_qkv(X, H)
    assert folded.shape == (B * H, n, d)
    for b in range(B):
        for i in range(H):
            # Row b*H + i is head i of sequence b: columns [i*d, (i+1)*d).
            assert_close(folded[b * H + i], X[b, :, i * d:(i + 1) * d])
    assert_close(folded, book.transpose_qkv(X, H))


def test_transpose_output_undoes_transpose_qkv():
    X = torch.randn(3, 7, 12)
    for H in (1, 2, 3, 4, 6, 12):
        assert_close(au.transpose_output(au.transpose_qkv(X, H), H), X,
                     rtol=0, atol=0)
    Y = torch.randn(6, 7, 4)                                    # (B*H, n, d), H = 2
    assert_close(au.transpose_qkv(au.transpose_output(Y, 2), 2), Y, rtol=0, atol=0)
    assert_close(au.transpose_output(Y, 2), book.transpose_output(Y, 2))


@pytest.mark.parametrize("call, received", [
    (lambda: au.transpose_qkv(torch.ones(2, 3, 10), 3), r"\(2, 3, 10\).*num_heads=3"),
    (lambda: au.transpose_qkv(torch.ones(2, 10), 2), r"\(2, 10\)"),
    (lambda: au.transpose_output(torch.ones(5, 3, 2), 2), r"\(5, 3, 2\).*num_heads=2"),
    (lambda: au.transpose_output(torch.ones(4, 3), 2), r"\(4, 3\)"),
])
def test_transpose_bad_input(call, received):
    with pytest.raises(ValueError, match=received):
        call()


# --------------------------------------------------------------------------
# Against nn.MultiheadAttention with the same weights
# --------------------------------------------------------------------------

def torch_mha_like(ours, num_hiddens, num_heads, key_size, value_size):
    """nn.MultiheadAttention sharing our weights (no bias, batch_first)."""
    reference = nn.MultiheadAttention(num_hiddens, num_heads, bias=False,
                                      batch_first=True, kdim=key_size,
                                      vdim=value_size).eval()
    with torch.no_grad():
        if reference._qkv_same_embed_dim:
            reference.in_proj_weight.copy_(torch.cat(
                [ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        else:
            reference.q_proj_weight.copy_(ours.W_q.weight)
            reference.k_proj_weight.copy_(ours.W_k.weight)
            reference.v_proj_weight.copy_(ours.W_v.weight)
        reference.out_proj.weight.copy_(ours.W_o.weight)
    return reference


CASES = {
    # name: (B, L, S, key_size, value_size)
    "self": (2, 5, 5, 12, 12),
    "cross": (3, 4, 6, 12, 12),
    "cross-kdim": (2, 3, 7, 5, 9),
}


@pytest.mark.parametrize("lens_kind", ["none", "1-D", "2-D", "2-D-float"])
@pytest.mark.parametrize("case", list(CASES))
def test_multihead_matches_nn_multiheadattention(case, lens_kind):
    B, L, S, key_size, value_size = CASES[case]
    num_hiddens, num_heads = 12, 3
    ours = au.MultiHeadAttention(key_size, num_hiddens, value_size, num_hiddens,
                                 num_heads, dropout=0).eval()
    reference = torch_mha_like(ours, num_hiddens, num_heads, key_size, value_size)
    queries = torch.randn(B, L, num_hiddens)
    if case == "self":
        keys = values = queries
    else:
        keys, values = torch.randn(B, S, key_size), torch.randn(B, S, value_size)

    # Every length >= 1: nn.MultiheadAttention returns NaN for an empty row.
    kwargs, valid_lens = {}, None
    if lens_kind == "1-D":
        valid_lens = torch.randint(1, S + 1, (B,))
        # nn.MultiheadAttention's key_padding_mask is True = IGNORE.
        kwargs["key_padding_mask"] = ~keep_mask(valid_lens, 1, S)[:, 0]     # (B, S)
    elif lens_kind.startswith("2-D"):
        valid_lens = torch.randint(1, S + 1, (B, L))
        ignore = ~keep_mask(valid_lens, L, S)                                # (B, L, S)
        ignore = ignore.repeat_interleave(num_heads, dim=0)                  # (B*H, L, S)
        if lens_kind == "2-D":
            kwargs["attn_mask"] = ignore                                     # True = IGNORE
        else:
            kwargs["attn_mask"] = torch.zeros(ignore.shape).masked_fill(ignore, -torch.inf)

    out = ours(queries, keys, values, valid_lens)
    expected, expected_weights = reference(queries, keys, values, need_weights=True,
                                           average_attn_weights=False, **kwargs)
    assert out.shape == (B, L, num_hiddens)
    assert_close(out, expected)
    weights = ours.attention.attention_weights
    assert weights.shape == (B * num_heads, L, S)
    assert_close(weights.reshape(B, num_heads, L, S), expected_weights)


# --------------------------------------------------------------------------
# The book's API
# --------------------------------------------------------------------------

def test_multihead_book_demo_shapes():
    # d2l 10.5: num_hiddens=100, num_heads=5, X (2, 4, 100), Y (2, 6, 100).
    num_hiddens, num_heads = 100, 5
    attention = au.MultiHeadAttention(num_hiddens, num_hiddens, num_hiddens,
                                      num_hiddens, num_heads, 0.5).eval()
    batch_size, num_queries, num_kvpairs = 2, 4, 6
    valid_lens = torch.tensor([3, 2])
    X = torch.ones((batch_size, num_queries, num_hiddens))
    Y = torch.ones((batch_size, num_kvpairs, num_hiddens))
    assert attention(X, Y, Y, valid_lens).shape == (2, 4, 100)
    assert attention.attention.attention_weights.shape == (10, 4, 6)
    # Heads of sequence b are rows b*H .. b*H+H-1 and share its length.
    weights = attention.attention.attention_weights.reshape(2, 5, 4, 6)
    assert (weights[0, ..., 3:] == 0).all() and (weights[1, ..., 2:] == 0).all()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("lens", [None, torch.tensor([3, 2]),
                                  torch.tensor([[1, 2, 3, 4], [6, 5, 4, 3]])],
                         ids=["none", "1-D", "2-D"])
def test_multihead_loads_the_books_state_dict_and_agrees(bias, lens):
    args = (6, 10, 7, 20, 4, 0.2)                # key, query, value sizes, h, H, dropout
    theirs = book.MultiHeadAttention(*args, bias=bias).eval()
    ours = au.MultiHeadAttention(*args, bias=bias).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    queries, keys, values = torch.randn(2, 4, 10), torch.randn(2, 6, 6), torch.randn(2, 6, 7)
    assert_close(ours(queries, keys, values, lens), theirs(queries, keys, values, lens))
    assert_close(ours.attention.attention_weights, theirs.attention.attention_weights)


def test_multihead_valid_lens_default_to_none():
    attention = au.MultiHeadAttention(4, 4, 4, 4, 2, 0).eval()
    X = torch.randn(1, 3, 4)
    assert_close(attention(X, X, X), attention(X, X, X, None))


# --------------------------------------------------------------------------
# Defects
# --------------------------------------------------------------------------

def test_multihead_does_not_write_into_its_inputs():
    attention = au.MultiHeadAttention(5, 4, 3, 8, 2, 0).eval()
    queries, keys, values = torch.randn(2, 3, 4), torch.randn(2, 6, 5), torch.randn(2, 6, 3)
    for valid_lens in (torch.tensor([2, 6]), torch.tensor([[1, 2, 3], [4, 5, 0]])):
        before = snapshot(queries, keys, values, valid_lens)
        attention(queries, keys, values, valid_lens)
        assert_unchanged(before, [queries, keys, values, valid_lens])


@ours_and_book()
def test_multihead_zero_valid_len_gives_zero_output(impl):
    attention = impl.MultiHeadAttention(5, 4, 3, 8, 2, 0).eval()
    queries, keys, values = torch.randn(2, 3, 4), torch.randn(2, 6, 5), torch.randn(2, 6, 3)
    valid_lens = torch.tensor([[0, 2, 3], [6, 0, 1]])
    out = attention(queries, keys, values, valid_lens)
    empty = valid_lens == 0                                          # (B, L)
    assert not out.isnan().any()
    weights = attention.attention.attention_weights.reshape(2, 2, 3, 6)
    assert (weights.permute(0, 2, 1, 3)[empty] == 0).all()
    assert (out[empty] == 0).all()              # W_o has no bias: zero stays zero


@ours_and_book()
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_multihead_in_half_precision(impl, dtype):
    attention = impl.MultiHeadAttention(8, 8, 8, 8, 2, 0).to(dtype).eval()
    X = torch.randn(2, 3, 8, dtype=dtype)
    valid_lens = torch.tensor([[0, 1, 3], [2, 0, 3]])
    out = attention(X, X, X, valid_lens)
    assert out.dtype == dtype
    assert not out.isnan().any()
    weights = attention.attention.attention_weights
    keep = keep_mask(valid_lens, 3, 3).repeat_interleave(2, dim=0)
    assert (weights[~keep] == 0).all()


@pytest.mark.parametrize("lens", [None, torch.tensor([0, 3]),
                                  torch.tensor([[1, 0], [3, 2]])],
                         ids=["none", "1-D", "2-D"])
def test_multihead_gradcheck(lens):
    attention = au.MultiHeadAttention(3, 4, 2, 4, 2, dropout=0).double().eval()
    queries = torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    values = torch.randn(2, 3, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda q, k, v: attention(q, k, v, lens), (queries, keys, values))
    params = dict(attention.named_parameters())

    def forward(*weights):
        return torch.func.functional_call(attention, dict(zip(params, weights)),
                                          (queries.detach(), keys.detach(),
                                           values.detach(), lens))

    assert torch.autograd.gradcheck(
        forward, tuple(p.detach().clone().requires_grad_() for p in params.values()))


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

@ours_and_book(raises=pytest.fail.Exception)
def test_num_hiddens_not_divisible_by_num_heads_fails_at_construction(impl):
    try:
        impl.MultiHeadAttention(10, 10, 10, num_hiddens=10, num_heads=3, dropout=0)
    except ValueError as error:
        assert "num_hiddens=10" in str(error) and "num_heads=3" in str(error)
        assert "expected" in str(error)
    else:
        pytest.fail("no ValueError at construction")     # the book waits for forward


@pytest.mark.parametrize("call, received", [
    # query, key and value sizes are 4, 5, 3
    (lambda m: m(torch.ones(2, 3, 6), torch.ones(2, 6, 5), torch.ones(2, 6, 3)),
     r"query_size=4.*\(2, 3, 6\)"),
    (lambda m: m(torch.ones(2, 3, 4), torch.ones(2, 6, 4), torch.ones(2, 6, 3)),
     r"key_size=5.*\(2, 6, 4\)"),
    (lambda m: m(torch.ones(2, 3, 4), torch.ones(2, 6, 5), torch.ones(2, 6, 4)),
     r"value_size=3.*\(2, 6, 4\)"),
    (lambda m: m(torch.ones(3, 4), torch.ones(2, 6, 5), torch.ones(2, 6, 3)),
     r"\(3, 4\)"),
    (lambda m: m(torch.ones(2, 3, 4), torch.ones(1, 6, 5), torch.ones(1, 6, 3)),
     "2, 1 and 1"),
    (lambda m: m(torch.ones(2, 3, 4), torch.ones(2, 6, 5), torch.ones(2, 6, 3),
                 torch.tensor([1, -2])), "-2"),
    (lambda m: m(torch.ones(2, 3, 4), torch.ones(2, 6, 5), torch.ones(2, 6, 3),
                 torch.ones(2, 3, 1)), r"\(2, 3, 1\)"),
])
def test_multihead_bad_input(call, received):
    attention = au.MultiHeadAttention(5, 4, 3, 8, 2, 0)
    with pytest.raises(ValueError, match=received) as error:
        call(attention)
    assert "expected" in str(error.value)


# Regression: valid_lens used to be repeated over heads before any check, so a
# wrong shape was reported as (B*H, ...), a shape the caller never passed.
def test_multihead_bad_valid_lens_message_names_the_callers_shape():
    attention = au.MultiHeadAttention(4, 4, 4, 8, 2, 0)
    X = torch.ones(2, 3, 4)
    for valid_lens in (torch.ones(2, 5), torch.ones(3), torch.ones(3, 3)):
        with pytest.raises(ValueError) as error:
            attention(X, X, X, valid_lens)
        assert f"got shape {tuple(valid_lens.shape)}" in str(error.value)


# Regression: a 0-D valid_lens used to fail as a raw IndexError in repeat_interleave.
def test_multihead_scalar_valid_lens_is_a_value_error():
    attention = au.MultiHeadAttention(4, 4, 4, 8, 2, 0)
    X = torch.ones(2, 3, 4)
    with pytest.raises(ValueError, match=r"\(\)"):
        attention(X, X, X, torch.tensor(2))


# Regression: num_heads=0 used to raise ZeroDivisionError, and a negative
# num_heads dividing num_hiddens failed later as a raw reshape RuntimeError.
@pytest.mark.parametrize("num_heads", [0, -2])
def test_multihead_non_positive_num_heads_is_a_value_error(num_heads):
    with pytest.raises(ValueError, match=f"num_heads={num_heads}"):
        au.MultiHeadAttention(4, 4, 4, 8, num_heads, 0)      # at construction


@pytest.mark.parametrize("function", ["transpose_qkv", "transpose_output"])
def test_transpose_zero_heads_is_a_value_error(function):
    with pytest.raises(ValueError, match="num_heads=0"):
        getattr(au, function)(torch.ones(2, 3, 4), 0)
