"""PositionalEncoding."""

import math

import pytest
import torch
from torch.testing import assert_close

import attention_utils as au
import book_reference as book
from unit_support import assert_unchanged, snapshot


def formula(max_len, num_hiddens):
    """P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(same), in float64."""
    P = torch.zeros(max_len, num_hiddens, dtype=torch.float64)
    for pos in range(max_len):
        for column in range(num_hiddens):
            angle = pos / 10000 ** ((column - column % 2) / num_hiddens)
            P[pos, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return P


@pytest.mark.parametrize("num_hiddens", [4, 5, 32])
def test_P_follows_the_formula(num_hiddens):
    encoding = au.PositionalEncoding(num_hiddens, 0, max_len=60)
    assert encoding.P.shape == (1, 60, num_hiddens)
    assert encoding.P.dtype == torch.float32
    # float32 angles up to 59 rad are exact to ~4e-6.
    assert_close(encoding.P[0].double(), formula(60, num_hiddens), atol=1e-5, rtol=0)


def test_P_equals_the_books_and_its_state_dict_loads():
    ours, theirs = au.PositionalEncoding(32, 0.1), book.PositionalEncoding(32, 0.1)
    assert_close(ours.P, theirs.P)
    assert ours.P.shape == (1, 1000, 32)
    # P is not a parameter or persistent buffer in the book: both state_dicts are empty.
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert list(ours.state_dict()) == []
    X = torch.randn(2, 7, 32)
    assert_close(ours.eval()(X), theirs.eval()(X))


def test_book_demo_encodes_zeros_as_P():
    # d2l 10.6.3: PositionalEncoding(32, 0), X = zeros (1, 60, 32)
    encoding = au.PositionalEncoding(32, 0).eval()
    X = encoding(torch.zeros((1, 60, 32)))
    assert_close(X, encoding.P[:, :60, :])


def test_forward_adds_P_and_applies_dropout_only_in_training():
    encoding = au.PositionalEncoding(8, dropout=0.5)
    X = torch.randn(3, 10, 8)
    before = snapshot(X)
    assert_close(encoding.eval()(X), X + encoding.P[:, :10])
    out = encoding.train()(X)
    assert (out == 0).any()                                      # dropout in training
    kept = out != 0
    assert_close(out[kept], 2 * (X + encoding.P[:, :10]).expand_as(out)[kept])
    assert_unchanged(before, [X])


def test_P_follows_the_module_and_keeps_the_input_dtype():
    encoding = au.PositionalEncoding(6, 0).eval()
    assert "P" in dict(encoding.named_buffers())
    assert encoding.double().P.dtype == torch.float64
    X = torch.randn(2, 3, 6, dtype=torch.bfloat16)
    assert au.PositionalEncoding(6, 0)(X).dtype == torch.bfloat16


@pytest.mark.parametrize("X, received", [
    (torch.zeros(3, 8), r"\(3, 8\)"),                 # rank 2
    (torch.zeros(1, 3, 6), r"\(1, 3, 6\)"),           # wrong h
    (torch.zeros(1, 11, 8), r"\(1, 11, 8\)"),         # longer than max_len
])
def test_bad_input(X, received):
    with pytest.raises(ValueError, match=received) as error:
        au.PositionalEncoding(8, 0, max_len=10)(X)
    assert "expected" in str(error.value)
