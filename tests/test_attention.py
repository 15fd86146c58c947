"""DotProductAttention and AdditiveAttention."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import attention_utils as au
import book_reference as book
from unit_support import assert_unchanged, keep_mask, ours_and_book, snapshot

B, L, S, E, Ev = 2, 3, 5, 4, 6


def qkv(dtype=torch.float32, query_size=E, key_size=E):
    return (torch.randn(B, L, query_size, dtype=dtype),
            torch.randn(B, S, key_size, dtype=dtype),
            torch.randn(B, S, Ev, dtype=dtype))


LENS = {
    "none": None,
    "1-D": torch.tensor([2, 5]),
    "2-D": torch.tensor([[1, 3, 5], [4, 2, 1]]),
}


# --------------------------------------------------------------------------
# DotProductAttention against F.scaled_dot_product_attention
# --------------------------------------------------------------------------

@pytest.mark.parametrize("lens_name", list(LENS))
def test_dot_product_matches_sdpa(lens_name):
    valid_lens = LENS[lens_name]
    queries, keys, values = qkv()
    attention = au.DotProductAttention(dropout=0).eval()
    out = attention(queries, keys, values, valid_lens)
    mask = None if valid_lens is None else keep_mask(valid_lens, L, S)   # True = attend
    assert_close(out, F.scaled_dot_product_attention(queries, keys, values,
                                                     attn_mask=mask))
    assert out.shape == (B, L, Ev)
    assert attention.attention_weights.shape == (B, L, S)
    # The stored weights are what produced the output.
    assert_close(attention.attention_weights @ values, out)


def test_dot_product_zero_length_matches_sdpa_zeros():
    queries, keys, values = qkv()
    valid_lens = torch.tensor([[0, 3, 5], [4, 0, 0]])
    out = au.DotProductAttention(0)(queries, keys, values, valid_lens)
    mask = keep_mask(valid_lens, L, S)
    assert_close(out, F.scaled_dot_product_attention(queries, keys, values,
                                                     attn_mask=mask))


@pytest.mark.parametrize("lens_name", list(LENS))
def test_dot_product_matches_the_book(lens_name):
    valid_lens = LENS[lens_name]
    queries, keys, values = qkv()
    ours, theirs = au.DotProductAttention(0.5).eval(), book.DotProductAttention(0.5).eval()
    assert_close(ours(queries, keys, values, valid_lens),
                 theirs(queries, keys, values, valid_lens))
    assert_close(ours.attention_weights, theirs.attention_weights)


def test_dot_product_book_demo():
    # d2l 10.3.2: queries (2, 1, 2), keys (2, 10, 2), values (2, 10, 4), lens [2, 6]
    queries, keys = torch.normal(0, 1, (2, 1, 2)), torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    attention = au.DotProductAttention(dropout=0.5).eval()
    out = attention(queries, keys, values, torch.tensor([2, 6]))
    # All keys are equal, so each query averages its valid values.
    assert_close(out, torch.stack([values[0, :2].mean(0, keepdim=True),
                                   values[1, :6].mean(0, keepdim=True)]))


def test_dot_product_dropout_acts_on_weights_stored_before_it():
    queries, keys, values = qkv()
    attention = au.DotProductAttention(dropout=0.5).train()
    out = attention(queries, keys, values, torch.tensor([3, 5]))
    assert_close(attention.attention_weights.sum(-1), torch.ones(B, L))
    # Dropout changed the output, not the stored weights.
    assert not torch.allclose(out, attention.attention_weights @ values)


# --------------------------------------------------------------------------
# AdditiveAttention against the book
# --------------------------------------------------------------------------

@pytest.mark.parametrize("lens_name", list(LENS))
def test_additive_loads_the_books_state_dict_and_agrees(lens_name):
    valid_lens = LENS[lens_name]
    theirs = book.AdditiveAttention(key_size=3, query_size=7, num_hiddens=8,
                                    dropout=0.1).eval()
    ours = au.AdditiveAttention(key_size=3, query_size=7, num_hiddens=8,
                                dropout=0.1).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert sorted(ours.state_dict()) == ["W_k.weight", "W_q.weight", "w_v.weight"]
    queries, keys, values = qkv(query_size=7, key_size=3)
    assert_close(ours(queries, keys, values, valid_lens),
                 theirs(queries, keys, values, valid_lens))
    assert_close(ours.attention_weights, theirs.attention_weights)
    assert ours.attention_weights.shape == (B, L, S)


def test_additive_book_demo_shapes():
    # d2l 10.3.2: AdditiveAttention(key_size=2, query_size=20, num_hiddens=8)
    queries, keys = torch.normal(0, 1, (2, 1, 20)), torch.ones((2, 10, 2))
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    attention = au.AdditiveAttention(key_size=2, query_size=20, num_hiddens=8,
                                     dropout=0.1).eval()
    out = attention(queries, keys, values, torch.tensor([2, 6]))
    assert out.shape == (2, 1, 4)
    assert attention.attention_weights.shape == (2, 1, 10)
    assert_close(out, torch.stack([values[0, :2].mean(0, keepdim=True),
                                   values[1, :6].mean(0, keepdim=True)]))


# --------------------------------------------------------------------------
# Defects shared by both scoring functions
# --------------------------------------------------------------------------

def make(kind, impl=au, dtype=torch.float32, dropout=0.0):
    if kind == "dot":
        module = impl.DotProductAttention(dropout)
        sizes = dict(query_size=E, key_size=E)
    else:
        module = impl.AdditiveAttention(key_size=3, query_size=7, num_hiddens=8,
                                        dropout=dropout)
        sizes = dict(query_size=7, key_size=3)
    return module.to(dtype).eval(), qkv(dtype, **sizes)


@pytest.mark.parametrize("kind", ["dot", "additive"])
@pytest.mark.parametrize("lens_name", ["1-D", "2-D"])
def test_attention_does_not_write_into_its_inputs(kind, lens_name):
    module, (queries, keys, values) = make(kind)
    valid_lens = LENS[lens_name].clone()
    before = snapshot(queries, keys, values, valid_lens)
    module(queries, keys, values, valid_lens)
    assert_unchanged(before, [queries, keys, values, valid_lens])


@ours_and_book()
@pytest.mark.parametrize("kind", ["dot", "additive"])
def test_zero_valid_len_gives_zero_weights_and_output(impl, kind):
    module, (queries, keys, values) = make(kind, impl)
    valid_lens = torch.tensor([[0, 2, 0], [5, 0, 1]])
    out = module(queries, keys, values, valid_lens)
    empty = valid_lens == 0
    assert not out.isnan().any()
    assert (module.attention_weights[empty] == 0).all()    # book: uniform 1/S
    assert (out[empty] == 0).all()
    assert (out[~empty] != 0).any()


@ours_and_book()
@pytest.mark.parametrize("kind", ["dot", "additive"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_attention_in_half_precision(impl, kind, dtype):
    module, (queries, keys, values) = make(kind, impl, dtype)
    valid_lens = torch.tensor([[0, 2, 5], [3, 0, 1]])
    out = module(queries, keys, values, valid_lens)
    assert out.dtype == dtype and out.shape == (B, L, Ev)
    assert not out.isnan().any() and not module.attention_weights.isnan().any()
    keep = keep_mask(valid_lens, L, S)
    assert (module.attention_weights[~keep] == 0).all()
    # Close to the same module in float32.
    reference, _ = make(kind, au)
    reference.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
    expected = reference(queries.float(), keys.float(), values.float(), valid_lens)
    assert_close(out.float(), expected, atol=5e-2, rtol=5e-2)


def test_dot_product_masked_slots_stay_zero_with_huge_negative_scores():
    # Scores of about -1e32, far below the book's -1e6 fill.
    queries = torch.full((1, 2, 2), 1e16)
    keys = torch.full((1, 4, 2), -1e16)
    values = torch.randn(1, 4, 3)
    attention = au.DotProductAttention(0)
    out = attention(queries, keys, values, torch.tensor([2]))
    assert (attention.attention_weights[..., 2:] == 0).all()
    assert_close(out, values[:, :2].mean(1, keepdim=True).expand(1, 2, 3))
    theirs = book.DotProductAttention(0)
    theirs(queries, keys, values, torch.tensor([2]))
    assert (theirs.attention_weights[..., 2:] > 0).all()       # the book leaks


@pytest.mark.parametrize("kind", ["dot", "additive"])
@pytest.mark.parametrize("lens_name", ["none", "1-D", "2-D"])
def test_attention_gradcheck(kind, lens_name):
    module, inputs = make(kind, dtype=torch.float64)
    valid_lens = LENS[lens_name]
    if valid_lens is not None:
        valid_lens = valid_lens.clone()
        valid_lens[0, ...] = 0                                  # an empty row too
    inputs = [X.requires_grad_() for X in inputs]
    assert torch.autograd.gradcheck(
        lambda q, k, v: module(q, k, v, valid_lens), inputs)


def test_additive_gradcheck_parameters():
    module, (queries, keys, values) = make("additive", dtype=torch.float64)
    params = dict(module.named_parameters())

    def forward(*weights):
        return torch.func.functional_call(
            module, dict(zip(params, weights)),
            (queries, keys, values, torch.tensor([2, 4])))

    assert torch.autograd.gradcheck(
        forward, tuple(p.detach().clone().requires_grad_() for p in params.values()))


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

def test_dot_product_rejects_different_query_and_key_sizes():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(2, 5, 6\)") as error:
        au.DotProductAttention(0)(torch.ones(2, 3, 4), torch.ones(2, 5, 6),
                                  torch.ones(2, 5, 7))
    assert "expected" in str(error.value)


@pytest.mark.parametrize("kind", ["dot", "additive"])
@pytest.mark.parametrize("change, received", [
    (lambda q, k, v: (q[0], k, v), r"\(3, \d+\)"),                  # queries 2-D
    (lambda q, k, v: (q, k[None], v), r"\(1, 2, 5, \d+\)"),         # keys 4-D
    (lambda q, k, v: (q, k, v[:, 0]), r"\(2, 6\)"),                 # values 2-D
    (lambda q, k, v: (q[:1], k, v), r"1, 2 and 2"),                 # batch sizes
    (lambda q, k, v: (q, k, v[:1]), r"2, 2 and 1"),
    (lambda q, k, v: (q, k, v[:, :4]), r"\(2, 4, 6\)"),             # S differs
])
def test_attention_bad_shapes(kind, change, received):
    module, inputs = make(kind)
    with pytest.raises(ValueError, match=received) as error:
        module(*change(*inputs))
    assert "expected" in str(error.value)


@pytest.mark.parametrize("kind", ["dot", "additive"])
@pytest.mark.parametrize("valid_lens, received", [
    (torch.tensor([1, 2, 3]), r"\(2,\).*\(3,\)"),
    (torch.tensor([[1, 2], [3, 4]]), r"\(2, 2\)"),
    (torch.tensor([1, -3]), "-3"),
])
def test_attention_bad_valid_lens(kind, valid_lens, received):
    module, inputs = make(kind)
    with pytest.raises(ValueError, match=received):
        module(*inputs, valid_lens)


def test_additive_rejects_wrong_feature_sizes():
    module, (queries, keys, values) = make("additive")
    with pytest.raises(ValueError, match=r"query_size=7.*\(2, 3, 4\)"):
        module(queries[..., :4], keys, values)
    with pytest.raises(ValueError, match=r"key_size=3.*\(2, 5, 2\)"):
        module(queries, keys[..., :2], values)
