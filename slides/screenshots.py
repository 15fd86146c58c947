"""Screenshot every slide of exported decks, as a student sees them at 1280x720.

    make screenshots                 # every deck (runs `make slides` first)
    make screenshots DECK=02_nadaraya_watson
    python slides/screenshots.py [--slides build/slides] [--out build/screenshots] [deck ...]

Writes build/screenshots/<deck>/NN.png (slides in order, subslides included,
all fragments shown) and prints one line per slide, flagging slides that are
taller than the 720 px slide, wider than 1280 px, or have untypeset math.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def problems(info: dict) -> list[str]:
    out = []
    if info["height"] > info["maxHeight"]:
        out.append(f"TOO TALL {info['height']}px > {info['maxHeight']}px")
    if info["width"] > info["maxWidth"] + 2:
        out.append(f"TOO WIDE {info['width']}px > {info['maxWidth']}px")
    if info["untypeset"] or info["raw"]:
        out.append(f"RAW MATH {(info['untypeset'] + info['raw'])[:2]}")
    if info["errors"]:
        out.append(f"MATH ERROR {info['errors'][:2]}")
    return out


def shoot_deck(context, html: Path, out: Path, limit: int | None = None) -> list[dict]:
    """Screenshot the first `limit` slides (all when None) of one deck into out/NN.png."""
    page, log = browser.open_static_deck(context, html)
    out.mkdir(parents=True, exist_ok=True)
    infos = []
    try:
        for n, (h, v) in enumerate(page.evaluate(browser.SLIDES_JS)[:limit], start=1):
            info = browser.goto_slide(page, h, v)
            info["png"] = out / f"{n:02d}.png"
            page.screenshot(path=str(info["png"]))
            infos.append(info)
    finally:
        page.close()
    for url in log.external:
        print(f"  blocked external request: {url}")
    for err in log.errors + log.failed:
        print(f"  page error: {err}")
    return infos


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("decks", nargs="*", help="deck names (e.g. 01_attention_cues); default: all")
    ap.add_argument("--slides", default=str(ROOT / "build" / "slides"))
    ap.add_argument("--out", default=str(ROOT / "build" / "screenshots"))
    args = ap.parse_args(argv)

    slides = Path(args.slides)
    htmls = sorted(slides.glob("*.slides.html"))
    if args.decks:
        wanted = {d.removesuffix(".ipynb").removesuffix(".slides.html") for d in args.decks}
        htmls = [h for h in htmls if h.name.removesuffix(".slides.html") in wanted]
    if not htmls:
        sys.exit(f"no exported decks in {slides} matching {args.decks or 'anything'}; run `make slides` first")
    flagged = 0
    with browser.launch() as context:
        for html in htmls:
            deck = html.name.removesuffix(".slides.html")
            out = Path(args.out) / deck
            shutil.rmtree(out, ignore_errors=True)
            print(f"{deck}:")
            for info in shoot_deck(context, html, out):
                bad = problems(info)
                flagged += bool(bad)
                i = info["indices"]
                print(f"  {info['png'].name}  slide {i['h']}.{i['v']}  {info['height']:4d}px  "
                      f"{info['title'][:40]!r:44} {'  '.join(bad)}")
    print(f"screenshots in {args.out}; {flagged} slide(s) flagged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
