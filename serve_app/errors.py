"""Errors become HTTP answers here, once: ``{"error": {"code": ..., "message": ...}}`` with the error's status.

A 5xx answer is our fault, never the caller's: its body names the request id (Serve's ``X-Request-Id``, or one made
here when no proxy gave one) so a user's report can be matched with the replica's log line.
"""

from __future__ import annotations

import logging
import math
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from deployments.common.errors import PortraitError

logger = logging.getLogger(__name__)


def error_body(code: str, message: str, details: dict | None = None) -> dict:
    error: dict = {"code": code, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def _server_error(request: Request, status: int, body: dict, headers: dict[str, str] | None = None) -> JSONResponse:
    """A 5xx answer carrying the request id (in the body; in a header too when Serve's proxy has not set one)."""
    headers = dict(headers or {})
    request_id = request.headers.get("x-request-id")
    if request_id is None:
        request_id = headers["X-Request-Id"] = uuid.uuid4().hex
    body["error"]["request_id"] = request_id
    return JSONResponse(body, status_code=status, headers=headers)


async def _portrait_error(request: Request, exc: PortraitError) -> JSONResponse:
    retry_after_s = exc.details.get("retry_after_s", 5 if exc.http_status == 503 else None)
    headers = {"Retry-After": str(max(1, math.ceil(retry_after_s)))} if retry_after_s is not None else None
    body = error_body(exc.code, exc.message, exc.details)
    if exc.http_status >= 500:
        logger.error("%s on %s %s: %s", exc.code, request.method, request.url.path, exc.message, exc_info=exc)
        return _server_error(request, exc.http_status, body, headers)
    return JSONResponse(body, status_code=exc.http_status, headers=headers)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [
        {
            "field": ".".join(str(part) for part in err.get("loc", ()) if part not in ("body", "query")),
            "problem": err["msg"],
        }
        for err in exc.errors()
    ]
    message = "; ".join(f"{p['field'] or 'request'}: {p['problem']}" for p in problems)
    return JSONResponse(error_body("invalid_parameter", message, {"problems": problems}), status_code=422)


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    codes = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 413: "body_too_large"}
    code = codes.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    return _server_error(request, 500, error_body("internal_error", f"{type(exc).__name__}: the service failed"))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PortraitError, _portrait_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
