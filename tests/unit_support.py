"""Helpers shared by the unit tests (not a test module itself)."""

import pytest
import torch

import attention_utils as au
import book_reference as book


def ours_and_book(raises=AssertionError):
    """Parametrize ``impl`` over our module and the book's formulation.

    The book's case is a strict xfail: the test must fail on the book (with
    ``raises``), which proves the test can catch the defect it is about. If
    the book ever passed, strict=True would turn that into a failure.
    """
    return pytest.mark.parametrize("impl", [
        pytest.param(au, id="ours"),
        pytest.param(book, id="book", marks=pytest.mark.xfail(
            strict=True, raises=raises,
            reason="the book's defect: this test exists to catch it")),
    ])


def keep_mask(valid_lens, num_queries, num_keys):
    """(B, L, S) boolean, True = attend, built independently of the module."""
    valid_lens = torch.as_tensor(valid_lens)
    positions = torch.arange(num_keys)
    if valid_lens.dim() == 1:
        keep = positions[None, None, :] < valid_lens[:, None, None]   # (B, 1, S)
    else:
        keep = positions[None, None, :] < valid_lens[:, :, None]      # (B, L, S)
    return keep.expand(valid_lens.shape[0], num_queries, num_keys)


def snapshot(*tensors):
    """Copies to compare against after a call, to prove nothing was written."""
    return [t.clone() for t in tensors]


def assert_unchanged(before, after):
    for b, a in zip(before, after):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
