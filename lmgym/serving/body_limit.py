"""A cap on the size of a request body, enforced before anything parses it.

`BodyLimit` is plain ASGI middleware: a declared Content-Length over the cap is refused at once; otherwise
the body is read chunk by chunk (a chunked upload declares no length) and refused as soon as it passes the
cap, so at most `max_bytes` are ever held. Either way the answer is a 413 whose body is
{"detail": "<one line>"}, and the app never sees the request. A body within the cap is handed on whole.
"""
from __future__ import annotations

from lmgym.core.extras import extra_imports

with extra_imports("The HTTP server"):  # starlette comes with fastapi, in the [serve] extra
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuse (413) any HTTP request whose body is longer than `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            text = declared.decode("latin-1").strip()
            if not text.isdigit():
                await _refuse(scope, receive, send, 400, f"Content-Length {text[:40]!r} is not a byte count")
                return
            if int(text) > self.max_bytes:
                await _refuse(scope, receive, send, 413, self._too_large(f"{int(text)} bytes"))
                return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _refuse(scope, receive, send, 413, self._too_large(f"over {self.max_bytes} bytes"))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    def _too_large(self, size: str) -> str:
        return f"the request body is {size}; this server takes at most {self.max_bytes} (max_body_bytes)"


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the whole body once, then whatever the client sends next (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    await JSONResponse(status_code=status, content={"detail": detail})(scope, receive, send)
