"""A service listening on a loopback address answers only requests addressed to one (DNS rebinding).

A web page the user opens can point a name it owns at 127.0.0.1 and then call the service as its own
origin: the browser sends that name as the Host header, and the page reads the answers (a store's texts
from /occurrences, the model's vectors). A request on loopback whose Host names no loopback address is
refused in one line, before any route runs; a service on another address (`--host 0.0.0.0`, meant to be
reached by name) is left alone, and guarded by `--api-key`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import Headers

from ..errors import InvalidSpec
from .error_answers import error_response
from .validation import body_pending, route_path

__all__ = ["LOOPBACK", "LoopbackHosts", "allowed_host", "guard_loopback"]

# The loopback addresses and names a Host header may carry (IPv6 written bare, as the bind address is)
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# A Host header (RFC 9110 7.2): a name or IPv4 address (one trailing dot allowed: "localhost." is the same
# name written absolute), or an [IPv6] literal, then an optional :port of digits; anything else is refused.
_HOST = re.compile(
    r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\.?)(?::\d*)?"
)
# An IPv6 address sent bare, without brackets or port (as the bind address is written).
_BARE_V6 = re.compile(r"[0-9A-Fa-f]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")


def guard_loopback(app: FastAPI, host: str, *, allow: Iterable[str] = ()) -> None:
    """Add `LoopbackHosts` to `app` where it listens on loopback (`host`), answering the names `allow`
    too (a reverse proxy on the machine that passes its own: `serve --allow-host`); elsewhere nothing."""
    if host in LOOPBACK:
        app.add_middleware(LoopbackHosts, allow=frozenset(allowed_host(name) for name in allow))


def allowed_host(name: str) -> str:
    """An --allow-host name as a Host header's is compared: read by the same parse (its port, brackets and
    trailing dot dropped: 'api.example.com.', 'api.example.com:8080', '[fd00::1]'); InvalidSpec where the
    header could never carry it."""
    found = host_name(name.strip())
    if found is None:
        raise InvalidSpec(
            f"--allow-host {name!r} is no host name: give a name, an IPv4 address or an [IPv6] one, as the "
            "proxy's Host header carries it (api.example.com)"
        )
    return _same(found)


class LoopbackHosts:
    """ASGI middleware: refuse (400) an HTTP request whose Host header names no loopback address (nor one
    of `allow`)."""

    def __init__(self, app: Any, allow: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.names = LOOPBACK | allow

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Pass a request addressed to loopback (or with no Host: no browser sends none) to the app."""
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            given = headers.get("host", "")
            name = host_name(given)
            if given and (name is None or _same(name) not in self.names):
                message = (
                    f"the Host header names {given!r}, not the loopback address the service listens on: "
                    "reach it as http://127.0.0.1:PORT or http://localhost:PORT (a page that points another "
                    "name here, DNS rebinding, is refused); a reverse proxy's name: serve --allow-host "
                    "NAME"
                )
                # refused before its body is read: the connection closes rather than read the body through
                closing = {"Connection": "close"} if body_pending(headers) else None
                await error_response(route_path(scope), 400, message, headers=closing)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(host: str) -> str | None:
    """A Host header's name without its port and trailing dot: '127.0.0.1:8080' -> '127.0.0.1', '[::1]:80'
    -> '::1', 'localhost.' -> 'localhost'; None where it is no host ('127.0.0.1:80@evil.com')."""
    if _BARE_V6.fullmatch(host):
        return host
    found = _HOST.fullmatch(host)
    if found is None:
        return None
    return found.group("v6") or found.group("name")


def _same(name: str) -> str:
    """A host name as names are compared: lowercase, an IPv6 address in its one short form ('0:0::1' is
    '::1')."""
    if ":" in name:
        try:
            return ipaddress.IPv6Address(name).compressed
        except ValueError:
            pass
    return name.lower()
