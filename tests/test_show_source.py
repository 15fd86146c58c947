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


def test_every_public_implementation_still_parses_without_its_checks():
    import ast
    import inspect

    shown = 0
    for name in au.__all__:
        obj = getattr(au, name)
        targets = [obj] if inspect.isfunction(obj) else [
            m for m in vars(obj).values() if inspect.isfunction(m)] if inspect.isclass(obj) else []
        for target in targets:
            ast.parse(au.show_source(target).data)  # a dropped check never leaves a broken block
            shown += 1
    assert shown > 40


def test_loops_that_only_check_and_whole_line_comments_are_left_out():
    code = au.show_source(au.nw_kernel_regression).data
    assert "for X, name in" not in code and "raise" not in code
    assert "(n, m)" in code                              # shape comments at line ends stay
    code = au.show_source(au.masked_softmax).data
    assert "\n    #" not in code
    assert "# The book fills" in au.show_source(au.masked_softmax, comments=True).data
