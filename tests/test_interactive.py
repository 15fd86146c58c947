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


def test_every_frame_says_its_setting_and_what_it_shows():
    fig = au.interactive(draw, valid_len=au.Slider(range(4), value=2, description="有效长度"), d=[8, 64])
    html = fig._repr_mimebundle_()["text/html"]
    spec, _ = frames_of(html)
    assert len(spec["alts"]) == 8
    assert spec["alts"][4].startswith("有效长度 = 2，d = 8。柱状图「2 8」：")   # setting, then the figure
    assert spec["alts"][7].startswith("有效长度 = 3，d = 64。柱状图「3 64」：")
    default_alt = re.search(r'<img class="au-frame" alt="([^"]*)"', html).group(1)
    assert default_alt == spec["alts"][4]                          # shown unrun / untrusted
    assert '<p class="au-status" aria-live="polite"' in html        # announces a new setting


def test_offline_sliders_have_a_name_move_with_the_keyboard_and_announce(tmp_path):
    browser = pytest.importorskip("slides.browser", reason="slides/browser.py (Playwright)")
    if browser.chromium_path() is None:
        pytest.skip("no Chromium")
    fig = au.interactive(draw, valid_len=au.Slider(range(4), value=2, description="有效长度"), d=[8, 64])
    page_file = tmp_path / "interactive.html"
    page_file.write_text(f'<!DOCTYPE html><html lang="zh-CN"><meta charset="utf-8"><body>'
                         f'{fig._repr_mimebundle_()["text/html"]}</body></html>', encoding="utf-8")
    spec, _ = frames_of(fig._repr_mimebundle_()["text/html"])
    with browser.launch() as context:
        page = context.new_page()
        log = browser.watch(page, ("file://",))
        page.goto(page_file.as_uri())
        first = page.locator("input[type=range]").first
        assert first.evaluate("i => i.labels[0].innerText").startswith("有效长度")   # visible label = name
        assert first.get_attribute("aria-valuetext") == "2"
        assert page.locator(".au-status").inner_text() == ""            # nothing said before a move
        first.focus()
        page.keyboard.press("ArrowRight")
        assert first.input_value() == "3" and first.get_attribute("aria-valuetext") == "3"
        assert page.locator(".au-status").text_content() == "有效长度 = 3，d = 8"
        assert page.locator("img.au-frame").get_attribute("alt") == spec["alts"][6]
        assert page.locator("img.au-frame").get_attribute("src") == spec["frames"][6]
        assert log.external == [] and log.errors == []
