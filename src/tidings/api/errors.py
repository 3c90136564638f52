"""problem+json rendering (RFC 9457) of errors, with the status from `tidings.error_status`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tidings.domain.errors import InvalidInput, TidingsError, Unauthenticated
from tidings.error_status import retry_after, status_for
from tidings.observability.logging import get_logger

PROBLEM_JSON = "application/problem+json"


# Codes for errors that FastAPI/Starlette raise before a tidings use case runs.
CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    500: "internal_error",
}
log = get_logger(__name__)


def problem(
    status: int,
    code: str,
    title: str,
    detail: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"https://tidings.dev/problems/{code}",
        "title": title,
        "status": status,
        "code": code,
    }
    if detail:
        body["detail"] = detail
    body.update(extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


async def _tidings_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TidingsError)
    return tidings_problem(exc)


def tidings_problem(exc: TidingsError) -> JSONResponse:
    """The problem+json answer for a tidings error (its code, status and fields)."""
    status = status_for(exc)
    headers = retry_after(exc)
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    extra: dict[str, Any] = exc.problem_fields()
    if exc.field:
        extra["errors"] = [{"field": exc.field, "message": exc.detail}]
    return problem(status, exc.code, exc.title, exc.detail, headers=headers or None, **extra)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": ".".join(str(part) for part in error["loc"]), "message": error["msg"]}
        for error in exc.errors()
    ]
    if any(error.get("type") == "json_invalid" for error in exc.errors()):
        return problem(400, "bad_request", "The request body is not valid JSON", errors=errors)
    return problem(422, "invalid_input", InvalidInput.title, errors=errors)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = CODE_BY_STATUS.get(exc.status_code, "http_error")
    title = str(exc.detail) if exc.detail else code.replace("_", " ").capitalize()
    return problem(exc.status_code, code, title, headers=dict(exc.headers or {}) or None)


async def _unexpected_error(_request: Request, exc: Exception) -> JSONResponse:
    # The exception type only: messages can carry data from the request.
    log.error("http.unhandled_error", error_type=type(exc).__name__)
    return problem(500, "internal_error", "Internal error; the request id is in the logs")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TidingsError, _tidings_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)


PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "description": "An RFC 9457 problem; `code` is stable (docs/api.md lists every one).",
    "required": ["type", "title", "status", "code"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "code": {"type": "string"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}


def document_problems(openapi: dict[str, Any]) -> dict[str, Any]:
    """Make the OpenAPI document say what the API answers on error: every operation's 422 and
    every other error status (`default`) is an `application/problem+json` Problem, not
    FastAPI's `HTTPValidationError`, so clients and schema-driven tests can rely on it. Pages
    for people (`text/html`) answer with an error page, or a Problem when the request was
    refused before the page ran (body too large, NUL)."""
    openapi.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    problem_content = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    page_content = {"text/html": {"schema": {"type": "string"}}, **problem_content}
    for operations in openapi.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            is_page = "text/html" in responses.get("200", {}).get("content", {})
            response = {
                "description": "An error page" if is_page else "A problem (RFC 9457)",
                "content": page_content if is_page else problem_content,
            }
            if "422" in responses:
                responses["422"] = {**response, "description": "Invalid input"}
            responses["default"] = response
    schemas = openapi["components"]["schemas"]
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return openapi
