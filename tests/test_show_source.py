"""au.show_source: the module's code on a slide, without docstrings or input checks."""

import attention_utils as au


def test_slides_show_the_idea_without_docstrings_or_input_checks():
    code = au.show_source(au.MultiHeadAttention.__init__).data
    assert "raise ValueError" not in code and '"""' not in code
    assert "self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)" in code
    code = au.show_source(au.DotProductAttention.forward).data
    assert "_check_qkv" not in code and "masked_softmax" in code


def test_checks_and_docstrings_on_request():
    code = au.show_source(au.MultiHeadAttention.__init__, docstring=True, checks=True).data
    assert "raise ValueError" in code
    assert code.count("\n") > au.show_source(au.MultiHeadAttention.__init__).data.count("\n")


def test_what_is_left_still_parses_and_runs_the_same_names():
    import ast

    for obj in (au.masked_softmax, au.AdditiveAttention.forward, au.MultiHeadAttention.forward,
                au.transpose_qkv):
        ast.parse(au.show_source(obj).data)  # a dropped guard never leaves a broken block
