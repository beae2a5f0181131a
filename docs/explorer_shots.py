"""Make the explorer's pictures on docs/explorer.md: `.venv/bin/python docs/explorer_shots.py`.

Serves the bundled model on a free loopback port (tests/test_server.py's `serving`, as the explorer's
own test does), drives Chromium through Playwright, writes docs/explorer.png (the Layers tab at layer
3) and docs/explorer-cka.png (layer x layer CKA over the Sentences tab's lines), and stops the server.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

DOCS = Path(__file__).parent
CHROMIUM = "/usr/bin/chromium"


def shoot(page: Page, path: Path, first: str, last: str, below: int = 0, width: int = 960) -> None:
    """A picture of the page from element `first` down to the lowest of `last` (plus `below` pixels)."""
    top = page.locator(first).bounding_box()
    boxes = [box for box in (found.bounding_box() for found in page.locator(last).all()) if box]
    assert top is not None and boxes
    height = max(box["y"] + box["height"] for box in boxes) + below - top["y"] + 20
    page.screenshot(
        path=str(path), clip={"x": top["x"] - 10, "y": top["y"] - 10, "width": width, "height": height}
    )
    print(f"wrote {path}")


def main() -> None:
    """Serve, shoot both pictures, stop."""
    sys.path.insert(0, str(DOCS.parent / "tests"))
    import bertscope
    from test_server import serving

    with serving(bertscope.load()) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1240, "height": 2600})
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready]", timeout=300_000)
        page.click("[data-tab=layers]")
        page.fill("#layer", "3")
        page.wait_for_selector("#heatmap[data-layer='3']")
        shoot(page, DOCS / "explorer.png", "header", "#heatmap, #drift", below=30, width=1200)
        page.click("#cka-go")
        page.wait_for_selector("#cka[data-rows]", timeout=300_000)
        shoot(page, DOCS / "explorer-cka.png", "#tab-layers h3", "#cka", below=30)
        browser.close()


if __name__ == "__main__":
    main()
