"""Make the explorer's pictures on docs/explorer.md: `python docs/explorer_shots.py` (from `make install`).

Starts `bertscope serve` on a free loopback port, drives Chromium through Playwright (as
tests/test_explorer.py does), writes docs/explorer.png (the Layers tab at layer 3) and
docs/explorer-cka.png (layer x layer CKA over the Sentences tab's lines), and stops the server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

DOCS = Path(__file__).parent
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_up(base: str, server: subprocess.Popen[bytes]) -> None:
    """Return once /health answers; fail if the server exits first."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"bertscope serve exited with {server.returncode}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)  # polling a server that is still starting; nothing else to wait on
    raise SystemExit("bertscope serve did not answer /health within 300 s")


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
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen([sys.executable, "-m", "bertscope", "serve", "--port", str(port)], env=env)
    try:
        wait_until_up(base, server)
        with sync_playwright() as p:
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
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
