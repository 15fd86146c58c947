"""The public surface: __all__, docstrings, the book's signatures, and that
bad input fails with a ValueError rather than a raw error from inside torch."""

import inspect
import pathlib
import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import attention_utils as au
import book_reference as book

TESTS = pathlib.Path(__file__).parent


def test_all_names_exist_and_are_documented():
    undocumented = []
    for name in au.__all__:
        obj = getattr(au, name)                     # AttributeError = a stale __all__
        # obj.__doc__, not inspect.getdoc: a class must not borrow nn.Module's.
        if not (obj.__doc__ or "").strip():
            undocumented.append(name)
        if isinstance(obj, type) and issubclass(obj, nn.Module):
            if not (obj.forward.__doc__ or "").strip():
                undocumented.append(f"{name}.forward")
    assert not undocumented, f"no docstring: {undocumented}"
    assert len(set(au.__all__)) == len(au.__all__)


def test_every_public_name_is_exercised_by_the_unit_tests():
    used = set()
    for path in TESTS.glob("test_*.py"):
        if path.name == "test_api.py" or path.name.startswith("test_slides"):
            continue
        used.update(re.findall(r"\bau\.(\w+)", path.read_text()))
    missing = sorted(set(au.__all__) - used)
    assert not missing, f"names in __all__ that no unit test calls: {missing}"


def test_module_has_no_undeclared_public_functions_or_classes():
    public = {name for name, obj in vars(au).items()
              if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
              and getattr(obj, "__module__", None) == au.__name__}
    assert public <= set(au.__all__), sorted(public - set(au.__all__))


BOOK_NAMES = ["sequence_mask", "masked_softmax", "AdditiveAttention",
              "DotProductAttention", "transpose_qkv", "transpose_output",
              "MultiHeadAttention", "PositionalEncoding", "NWKernelRegression",
              "show_heatmaps", "EncoderDecoder", "Seq2SeqEncoder", "Seq2SeqDecoder",
              "Seq2SeqAttentionDecoder", "MaskedSoftmaxCELoss", "bleu",
              "PositionWiseFFN", "AddNorm", "EncoderBlock", "TransformerEncoder",
              "DecoderBlock", "TransformerDecoder"]


def parameters(function):
    """The book's part of a signature: keyword-only extras (ours) are left out."""
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL, p.KEYWORD_ONLY)]


@pytest.mark.parametrize("name", BOOK_NAMES)
def test_signatures_follow_the_book(name):
    ours, theirs = getattr(au, name), getattr(book, name)
    if isinstance(ours, type):
        assert parameters(ours.__init__) == parameters(theirs.__init__)
        ours_forward = [n for n, _ in parameters(ours.forward)]
        assert ours_forward == [n for n, _ in parameters(theirs.forward)]
        if "valid_lens" in ours_forward:                       # optional in ours
            assert inspect.signature(ours.forward).parameters["valid_lens"].default is None
    else:
        ours_names = [n for n, _ in parameters(ours)]
        assert ours_names == [n for n, _ in parameters(theirs)]
        for (n, default), (_, book_default) in zip(parameters(ours), parameters(theirs)):
            if book_default is not inspect.Parameter.empty:
                assert default == book_default, n


def test_book_parameter_names():
    assert sorted(au.AdditiveAttention(2, 3, 4, 0).state_dict()) == [
        "W_k.weight", "W_q.weight", "w_v.weight"]
    assert sorted(au.MultiHeadAttention(2, 3, 5, 4, 2, 0).state_dict()) == [
        "W_k.weight", "W_o.weight", "W_q.weight", "W_v.weight"]
    assert sorted(au.MultiHeadAttention(2, 3, 5, 4, 2, 0, bias=True).state_dict()) == sorted(
        book.MultiHeadAttention(2, 3, 5, 4, 2, 0, bias=True).state_dict())
    assert list(au.NWKernelRegression().state_dict()) == ["w"]
    assert isinstance(au.MultiHeadAttention(2, 3, 5, 4, 2, 0).attention,
                      au.DotProductAttention)


# --------------------------------------------------------------------------
# Fuzz: arbitrary shapes either work or raise ValueError, never a raw error
# --------------------------------------------------------------------------

def shapes(min_rank=1, max_rank=4):
    return st.lists(st.integers(1, 4), min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def attention_call(draw):
    kind = draw(st.sampled_from(["masked_softmax", "dot", "additive", "multihead"]))
    q, k, v = draw(shapes()), draw(shapes()), draw(shapes())
    lens_shape = draw(st.none() | shapes(0, 3))
    lens = None
    if lens_shape is not None:
        lens = torch.randint(-1, 6, lens_shape)
    return kind, q, k, v, lens


@given(attention_call())
def test_bad_shapes_raise_value_error_only(call):
    kind, q, k, v, lens = call
    try:
        if kind == "masked_softmax":
            out = au.masked_softmax(torch.randn(q), lens)
        elif kind == "dot":
            out = au.DotProductAttention(0)(torch.randn(q), torch.randn(k),
                                            torch.randn(v), lens)
        elif kind == "additive":
            out = au.AdditiveAttention(2, 3, 4, 0)(torch.randn(q), torch.randn(k),
                                                   torch.randn(v), lens)
        else:
            out = au.MultiHeadAttention(2, 3, 4, 4, 2, 0)(
                torch.randn(q), torch.randn(k), torch.randn(v), lens)
    except ValueError as error:
        assert "expected" in str(error) and "got" in str(error)
    else:
        assert not out.isnan().any()
