"""A real headless Chromium for the HTML report's tests: a screenshot, and a page driven over
the DevTools protocol on ``--remote-debugging-pipe`` (no port, no network) whose console,
log, network and DOM a test can read. Plus a PNG decoder (zlib and the five scanline
filters) to tell a blank screenshot from a drawn one without an imaging library.

The Debian ``chromium`` package provides the browser (the Makefile's ``sandbox-tools``
installs it when missing); ``find_chromium`` is None without it and the tests say so.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

__all__ = ["Page", "find_chromium", "png_pixels", "screenshot"]

# Generous guards for a loaded machine: a test that hits one fails, it never waits forever.
START_TIMEOUT = 120.0
FLAGS = [
    "--headless",
    "--disable-gpu",
    "--no-sandbox",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--metrics-recording-only",
    "--mute-audio",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(browser: str, url: str, out: Path, size: tuple[int, int] = (1200, 900)) -> None:
    """Chromium's own ``--screenshot`` of ``url`` into ``out`` (PNG)."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--screenshot={out}",
                f"--window-size={size[0]},{size[1]}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT,
        )


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw pixel bytes) of an 8-bit RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    if depth != 8 or colour not in (2, 6):
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prev, bpp)
        rows.append(bytes(line if bpp == 3 else _rgb(line)))
        prev = line
    return width, height, rows


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> bytearray:
    """Undo one scanline's filter (PNG spec, section 9) in place."""
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            p = left + up - corner
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
            pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
            line[i] = (line[i] + pred) & 0xFF
    return line


def _rgb(line: bytearray) -> bytearray:
    out = bytearray()
    for i in range(0, len(line), 4):
        out += line[i : i + 3]
    return out


class Page:
    """One Chromium with one page, driven over ``--remote-debugging-pipe`` (fds 3 and 4).

    Every event of the page's session is kept in ``events`` (method, params), so a test
    reads the console (``Runtime.consoleAPICalled``, ``Runtime.exceptionThrown``), the log
    (``Log.entryAdded``: CSP refusals among them) and the network (``Network.requestWillBeSent``).
    """

    def __init__(self, browser: str):
        self._profile = tempfile.TemporaryDirectory()
        to_browser_r, self._to_browser = _high(*os.pipe())
        self._from_browser, from_browser_w = _high(*os.pipe())
        self.proc = subprocess.Popen(
            [
                browser,
                *FLAGS,
                f"--user-data-dir={self._profile.name}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Chromium reads commands on fd 3 and writes answers on fd 4: put the pipes there
            # in the child. Our own descriptors are close-on-exec (PEP 446), so none leaks.
            close_fds=False,
            preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._id = 0
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.session = ""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command (to the page's session once attached) and return its result."""
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            got = self._read(deadline)
            if got.get("id") == self._id:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                result: dict[str, Any] = got.get("result", {})
                return result
            if "method" in got:
                self.events.append((got["method"], got.get("params", {})))

    def wait_for(self, method: str) -> dict[str, Any]:
        """The next event ``method`` (events already seen count)."""
        for name, params in self.events:
            if name == method:
                return params
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            got = self._read(deadline)
            if "method" in got:
                self.events.append((got["method"], got.get("params", {})))
                if got["method"] == method:
                    params: dict[str, Any] = got.get("params", {})
                    return params

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait for its load event."""
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        got = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in got:
            raise RuntimeError(f"evaluate failed: {got['exceptionDetails']}")
        return got["result"].get("value")

    def close(self) -> None:
        try:
            self.session = ""
            self._send({"id": self._id + 1, "method": "Browser.close", "params": {}})
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)
            self._profile.cleanup()


def _high(*fds: int) -> tuple[int, ...]:
    """``fds`` moved to numbers of 10 and up (close-on-exec), so putting the pipes on 3 and 4
    in the child never overwrites one of them."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return moved
