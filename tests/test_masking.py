"""valid_lens_to_mask, sequence_mask, masked_softmax and causal_valid_lens."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.testing import assert_close

import attention_utils as au
import book_reference as book
from unit_support import assert_unchanged, keep_mask, ours_and_book, snapshot


# --------------------------------------------------------------------------
# valid_lens_to_mask and causal_valid_lens
# --------------------------------------------------------------------------

def test_valid_lens_to_mask_shapes_and_values():
    one_d = au.valid_lens_to_mask(torch.tensor([2, 0, 5]), 4, 3)
    assert one_d.shape == (3, 1, 3) and one_d.dtype == torch.bool
    assert one_d[:, 0].tolist() == [[True, True, False], [False, False, False],
                                    [True, True, True]]   # 5 > S keeps every key
    two_d = au.valid_lens_to_mask(torch.tensor([[1, 2], [3, 0]]), 2, 3)
    assert two_d.shape == (2, 2, 3)
    assert_close(two_d, keep_mask(torch.tensor([[1, 2], [3, 0]]), 2, 3))


def test_valid_lens_to_mask_accepts_a_list():
    assert_close(au.valid_lens_to_mask([1, 2], 1, 2),
                 torch.tensor([[[True, False]], [[True, True]]]))


def test_causal_valid_lens_is_a_lower_triangular_mask():
    lens = au.causal_valid_lens(2, 4)
    assert lens.shape == (2, 4)
    assert lens.tolist() == [[1, 2, 3, 4]] * 2
    keep = au.valid_lens_to_mask(lens, 4, 4)
    assert_close(keep, torch.ones(4, 4, dtype=torch.bool).tril().expand(2, 4, 4))
    weights = au.masked_softmax(torch.randn(2, 4, 4), lens)
    assert (weights.triu(diagonal=1) == 0).all()
    assert_close(weights[:, 0, 0], torch.ones(2))   # the first query sees only itself


# --------------------------------------------------------------------------
# sequence_mask
# --------------------------------------------------------------------------

def test_sequence_mask_values_match_the_book():
    X = torch.tensor([[1, 2, 3], [4, 5, 6]])
    out = au.sequence_mask(X, torch.tensor([1, 2]))
    assert out.tolist() == [[1, 0, 0], [4, 5, 0]]
    assert_close(out, book.sequence_mask(X.clone(), torch.tensor([1, 2])))
    assert au.sequence_mask(X, torch.tensor([0, 3]), value=-1).tolist() == [
        [-1, -1, -1], [4, 5, 6]]


def test_sequence_mask_keeps_trailing_dimensions():
    X = torch.ones(2, 3, 4)
    out = au.sequence_mask(X, torch.tensor([1, 2]), value=-1)
    assert out.shape == (2, 3, 4)
    assert (out[0, 1:] == -1).all() and (out[0, :1] == 1).all()
    assert (out[1, 2:] == -1).all() and (out[1, :2] == 1).all()


@ours_and_book()
def test_sequence_mask_does_not_write_into_its_input(impl):
    X, valid_len = torch.arange(12.).reshape(3, 4), torch.tensor([1, 4, 2])
    before = snapshot(X, valid_len)
    out = impl.sequence_mask(X, valid_len)
    assert_unchanged(before, [X, valid_len])
    assert out.data_ptr() != X.data_ptr()


@pytest.mark.parametrize("X, valid_len, received", [
    (torch.ones(3), torch.tensor([1, 2, 3]), r"\(3,\)"),                  # X rank 1
    (torch.ones(2, 3), torch.tensor([1, 2, 3]), r"\(3,\)"),               # wrong N
    (torch.ones(2, 3), torch.tensor([[1, 2]]), r"\(1, 2\)"),              # 2-D lens
    (torch.ones(2, 3), torch.tensor([1, -2]), "-2"),                      # negative
])
def test_sequence_mask_bad_input(X, valid_len, received):
    with pytest.raises(ValueError, match=received) as error:
        au.sequence_mask(X, valid_len)
    assert "expected" in str(error.value)


# --------------------------------------------------------------------------
# masked_softmax against F.softmax and the book
# --------------------------------------------------------------------------

def test_masked_softmax_without_lens_is_softmax():
    X = torch.randn(2, 3, 5)
    assert_close(au.masked_softmax(X, None), F.softmax(X, dim=-1))
    assert_close(au.masked_softmax(X), F.softmax(X, dim=-1))   # None by default


@pytest.mark.parametrize("valid_lens", [torch.tensor([2, 3]),
                                        torch.tensor([[1, 3, 2], [2, 4, 1]])],
                         ids=["1-D", "2-D"])
def test_masked_softmax_is_softmax_over_the_valid_keys(valid_lens):
    X = torch.randn(2, 3, 4)
    weights = au.masked_softmax(X, valid_lens)
    keep = keep_mask(valid_lens, 3, 4)
    for b in range(2):
        for i in range(3):
            n = int(keep[b, i].sum())
            assert_close(weights[b, i, :n], F.softmax(X[b, i, :n], dim=-1))
            assert (weights[b, i, n:] == 0).all()
    # Where no row is empty the book agrees, to rounding.
    assert_close(weights, book.masked_softmax(X.clone(), valid_lens))


def test_masked_softmax_book_demo():
    # d2l 10.3.1: masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))
    weights = au.masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))
    assert weights.shape == (2, 2, 4)
    assert (weights[0, :, 2:] == 0).all() and (weights[1, :, 3:] == 0).all()
    assert_close(weights.sum(-1), torch.ones(2, 2))


# --------------------------------------------------------------------------
# Property: rows sum to 1 over valid keys and are exactly 0 elsewhere
# --------------------------------------------------------------------------

@st.composite
def scores_and_lens(draw):
    B = draw(st.integers(1, 4))
    L = draw(st.integers(1, 5))
    S = draw(st.integers(1, 7))
    two_d = draw(st.booleans())
    lens_shape = (B, L) if two_d else (B,)
    lens = draw(st.lists(st.integers(0, S + 2), min_size=B * L if two_d else B,
                         max_size=B * L if two_d else B))
    scale = draw(st.sampled_from([1.0, 1e3, 1e30]))
    seed = draw(st.integers(0, 2**16))
    X = torch.randn(B, L, S, generator=torch.Generator().manual_seed(seed)) * scale
    return X, torch.tensor(lens).reshape(lens_shape)


def _check_rows(X, valid_lens, weights):
    B, L, S = X.shape
    keep = keep_mask(valid_lens, L, S)
    assert weights.shape == X.shape
    assert not weights.isnan().any()
    assert (weights[~keep] == 0).all()                      # exactly 0, not tiny
    assert (weights >= 0).all()
    sums = weights.sum(-1)
    has_keys = keep.any(-1)
    assert_close(sums[has_keys], torch.ones_like(sums[has_keys]))
    assert (sums[~has_keys] == 0).all()                     # empty rows: all zero


@given(scores_and_lens())
def test_masked_softmax_rows_property(case):
    X, valid_lens = case
    before = snapshot(X, valid_lens)
    weights = au.masked_softmax(X, valid_lens)
    assert_unchanged(before, [X, valid_lens])
    _check_rows(X, valid_lens, weights)


@given(scores_and_lens(), st.sampled_from([torch.float16, torch.bfloat16,
                                           torch.float64]))
def test_masked_softmax_rows_property_other_dtypes(case, dtype):
    X, valid_lens = case
    X = X.clamp(-1e4, 1e4).to(dtype)         # stay finite in float16
    weights = au.masked_softmax(X, valid_lens)
    assert weights.dtype == dtype
    assert not weights.isnan().any()
    keep = keep_mask(valid_lens, *X.shape[1:])
    assert (weights[~keep] == 0).all()
    sums = weights.float().sum(-1)
    has_keys = keep.any(-1)
    assert_close(sums[has_keys], torch.ones_like(sums[has_keys]),
                 atol=2e-2, rtol=0)
    assert (sums[~has_keys] == 0).all()


# --------------------------------------------------------------------------
# The book's defects, each shown to fail on the book's formulation
# --------------------------------------------------------------------------

@ours_and_book()
def test_masked_softmax_does_not_write_into_its_input(impl):
    X = torch.randn(2, 3, 4)
    valid_lens = torch.tensor([1, 3])
    before = snapshot(X, valid_lens)
    impl.masked_softmax(X, valid_lens)
    assert_unchanged(before, [X, valid_lens])


@ours_and_book()
@pytest.mark.parametrize("valid_lens", [torch.tensor([0, 2]),
                                        torch.tensor([[2, 0, 1], [0, 0, 4]])],
                         ids=["1-D", "2-D"])
def test_masked_softmax_zero_length_rows_are_all_zero(impl, valid_lens):
    X = torch.randn(2, 3, 4)
    weights = impl.masked_softmax(X, valid_lens)
    assert not weights.isnan().any()
    empty = keep_mask(valid_lens, 3, 4).any(-1).logical_not()    # (B, L)
    assert empty.any()
    assert (weights[empty] == 0).all()        # the book gives 1/S: uniform padding


@ours_and_book()
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_softmax_half_precision(impl, dtype):
    X = torch.randn(2, 3, 4).to(dtype)
    valid_lens = torch.tensor([[2, 0, 4], [1, 3, 0]])
    weights = impl.masked_softmax(X, valid_lens)
    assert weights.dtype == dtype
    assert not weights.isnan().any()          # float16 book: -1e6 -> -inf -> NaN
    keep = keep_mask(valid_lens, 3, 4)
    assert (weights[~keep] == 0).all()        # bfloat16 book: uniform empty rows
    assert_close(weights[keep.any(-1)].float().sum(-1), torch.ones(4),
                 atol=1e-2, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_softmax_low_precision_matches_float64(dtype):
    X = torch.randn(3, 2, 5)
    valid_lens = torch.tensor([1, 5, 3])
    weights = au.masked_softmax(X.to(dtype), valid_lens)
    expected = au.masked_softmax(X.double(), valid_lens).to(dtype)
    assert_close(weights, expected)


@ours_and_book()
@pytest.mark.parametrize("low", [-1e30, -3e38], ids=["-1e30", "-3e38"])
def test_masked_slots_stay_zero_below_any_fill_value(impl, low):
    # Real scores far below -1e6: the book's fill is then the *largest* score,
    # and all the weight leaks into the masked slots.
    X = torch.full((2, 2, 4), low)
    X[0, 0, 0] = low / 2                       # one valid key clearly ahead
    valid_lens = torch.tensor([2, 3])
    weights = impl.masked_softmax(X, valid_lens)
    keep = keep_mask(valid_lens, 2, 4)
    assert not weights.isnan().any()
    assert (weights[~keep] == 0).all()
    assert_close(weights.sum(-1), torch.ones(2, 2))
    assert weights[0, 0, 0] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_masked_softmax_rows_sum_to_one_when_scores_equal_the_fill(dtype):
    # E.g. scores already masked Hugging Face style with finfo(dtype).min.
    X = torch.full((1, 1, 4), torch.finfo(dtype).min, dtype=dtype)
    weights = au.masked_softmax(X, torch.tensor([2]))
    assert_close(weights.float(), torch.tensor([[[0.5, 0.5, 0.0, 0.0]]]))


def test_masked_softmax_gradcheck_without_mask():
    X = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(au.masked_softmax, (X,))


@ours_and_book(raises=RuntimeError)
@pytest.mark.parametrize("valid_lens", [torch.tensor([0, 2]),
                                        torch.tensor([[1, 0, 3], [3, 2, 1]])],
                         ids=["1-D", "2-D"])
def test_masked_softmax_gradcheck(impl, valid_lens):
    # The book fills the caller's leaf in place, so autograd refuses it.
    X = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda X: impl.masked_softmax(X, valid_lens),
                                    (X,))


def test_masked_softmax_gradient_ignores_masked_scores():
    X = torch.randn(2, 2, 4, requires_grad=True)
    au.masked_softmax(X, torch.tensor([[2, 0], [4, 1]])).pow(2).sum().backward()
    keep = keep_mask(torch.tensor([[2, 0], [4, 1]]), 2, 4)
    assert (X.grad[~keep] == 0).all()
    assert not X.grad.isnan().any()


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------

@pytest.mark.parametrize("X, valid_lens, received", [
    (torch.ones(2, 3), None, r"\(2, 3\)"),                                # X 2-D
    (torch.ones(1, 2, 3, 4), None, r"\(1, 2, 3, 4\)"),                    # X 4-D
    (torch.ones(2, 3, 4), torch.ones(2, 3, 4), r"\(2, 3, 4\)"),           # lens 3-D
    (torch.ones(2, 3, 4), torch.ones(2, 5), r"\(2, 5\)"),                 # lens (B, S)
    (torch.ones(2, 3, 4), torch.tensor(2), r"\(\)"),                      # lens 0-D
    (torch.ones(2, 3, 4), torch.tensor([1, 2, 3]), r"\(2,\).*\(3,\)"),      # wrong B
    (torch.ones(2, 3, 4), torch.tensor([[1, 2, 3]] * 3), r"\(2, 3\).*\(3, 3\)"),  # wrong B, 2-D
    (torch.ones(2, 3, 4), torch.tensor([1, -1]), "-1"),                   # negative
    (torch.ones(2, 3, 4), torch.tensor([[1, 2, 3], [0, -5, 1]]), "-5"),   # negative 2-D
])
def test_masked_softmax_bad_input(X, valid_lens, received):
    with pytest.raises(ValueError, match=received) as error:
        au.masked_softmax(X, valid_lens)
    assert "expected" in str(error.value)


def test_masked_softmax_rejects_a_non_tensor():
    with pytest.raises(ValueError, match="list"):
        au.masked_softmax([[[1.0, 2.0]]], None)
