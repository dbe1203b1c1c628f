"""Errors become HTTP answers here, once: ``{"error": {"code": ..., "message": ...}}`` with the error's status."""

from __future__ import annotations

import logging

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


async def _portrait_error(request: Request, exc: PortraitError) -> JSONResponse:
    headers = {"Retry-After": "5"} if exc.http_status == 503 else None
    return JSONResponse(error_body(exc.code, exc.message, exc.details), status_code=exc.http_status, headers=headers)


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
    code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("internal_error", f"{type(exc).__name__}: the service failed"), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PortraitError, _portrait_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
