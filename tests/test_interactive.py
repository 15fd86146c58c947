"""au.interactive: one figure per setting, shown live, offline and unrun."""

import base64
import json
import re

import matplotlib.pyplot as plt
import pytest

import attention_utils as au

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def draw(valid_len, d):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.bar(range(4), [1.0 if i < valid_len else 0.0 for i in range(4)])
    ax.set_title(f"{valid_len} {d}")
    return fig


def frames_of(html):
    spec = json.loads(re.search(r'<script type="application/json" class="au-frames">(.*?)</script>',
                                html, re.S).group(1).replace("<\\/", "</"))
    return spec, [base64.b64decode(u.split(",", 1)[1]) for u in spec["frames"]]


def test_one_frame_per_combination_in_row_major_order():
    fig = au.interactive(draw, valid_len=au.Slider(range(4), value=2, description="有效长度"), d=[8, 64])
    bundle = fig._repr_mimebundle_()
    spec, frames = frames_of(bundle["text/html"])
    assert len(frames) == 8 and len(set(frames)) == 8            # every setting drew something different
    assert all(f.startswith(b"\x89PNG") for f in frames)
    assert [c["labels"] for c in spec["controls"]] == [["0", "1", "2", "3"], ["8", "64"]]
    assert [c["index"] for c in spec["controls"]] == [2, 0]
    # The picture shown without scripts (unrun, untrusted) is the default setting: (2, 8) -> 2 * 2 + 0.
    default = re.search(r'<img class="au-frame"[^>]*src="([^"]+)"', bundle["text/html"]).group(1)
    assert default == spec["frames"][4]
    assert "有效长度 = 2" in bundle["text/plain"] and "interactive(" not in bundle["text/plain"]
    assert not plt.get_fignums(), "frames must be closed, never flushed by the inline backend"


def test_live_widget_swaps_frames():
    fig = au.interactive(draw, valid_len=au.Slider(range(4), value=2), d=[8, 64])
    bundle = fig._repr_mimebundle_()
    assert WIDGET_VIEW in bundle
    box = fig._widget
    *sliders, image = box.children
    assert image.value == fig.frames[4]
    sliders[0].value, sliders[1].value = 3, 1
    assert image.value == fig.frames[3 * 2 + 1]


def test_markup_is_deterministic_apart_from_pictures():
    a = au.interactive(draw, valid_len=[1, 2], d=[8])._repr_mimebundle_()
    b = au.interactive(draw, valid_len=[1, 2], d=[8])._repr_mimebundle_()
    strip = lambda h: re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "PNG", h)  # as tests/nbval_sanitize.cfg
    assert strip(a["text/html"]) == strip(b["text/html"])
    assert a["text/plain"] == b["text/plain"]


@pytest.mark.parametrize("call, message", [
    (lambda: au.interactive(draw), "at least one control"),
    (lambda: au.interactive(None, d=[1]), "draw to be a function"),
    (lambda: au.Slider([]), "at least one slider value"),
    (lambda: au.Slider([1, 2], value=3), "one of"),
    (lambda: au.Slider([1, 2], labels=["a"]), "2 labels"),
    (lambda: au.interactive(draw, valid_len=range(20), d=range(4)), "at most"),
])
def test_bad_input_names_what_was_expected(call, message):
    with pytest.raises(ValueError, match=message):
        call()
