# SPDX-License-Identifier: LGPL-2.1-or-later
"""The errors of the hutch client: every API error body
{"error": {"code", "message", "field"}} becomes one of these (docs/api.md)."""


class HutchError(Exception):
    """Anything the client raises."""


class ConnectionFailed(HutchError):
    """No server answered: none running, a stale socket, a refused port."""


class ApiError(HutchError):
    """An error answer of the API: HTTP status, code, message, and field (a
    JSON pointer into the request, or None)."""

    def __init__(self, status, code, message, field=None):
        super().__init__(f"{code}: {message}" + (f" (at {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class InvalidArgument(ApiError):
    """400: invalid_argument, invalid_json, invalid_path."""


class Unauthorized(ApiError):
    """401: TCP without the token, or with another."""


class PermissionDenied(ApiError):
    """403: permission_denied, read_only."""


class NotFound(ApiError):
    """404: not_found, no_such_route."""


class Conflict(ApiError):
    """409: conflict, busy, not_empty, is_a_directory, not_a_directory."""


class TooLarge(ApiError):
    """413, 431: too_large."""


class NotSupported(ApiError):
    """501: not_supported."""


class Unavailable(ApiError):
    """503: exec_failed, unavailable, out_of_memory."""


class Timeout(ApiError):
    """504: timeout."""


_BY_CODE = {
    "invalid_argument": InvalidArgument, "invalid_json": InvalidArgument,
    "invalid_path": InvalidArgument, "unauthorized": Unauthorized,
    "permission_denied": PermissionDenied, "read_only": PermissionDenied,
    "not_found": NotFound, "no_such_route": NotFound, "conflict": Conflict,
    "busy": Conflict, "not_empty": Conflict, "is_a_directory": Conflict,
    "not_a_directory": Conflict, "too_large": TooLarge, "not_supported": NotSupported,
    "exec_failed": Unavailable, "unavailable": Unavailable, "out_of_memory": Unavailable,
    "timeout": Timeout,
}


def error_from_body(status, body):
    """The typed error of an answer with @status and bytes @body."""
    import json

    try:
        e = json.loads(body)["error"]
        code, message, field = str(e["code"]), str(e["message"]), e.get("field")
    except (ValueError, KeyError, TypeError):
        code, message, field = "internal", f"HTTP {status}: {body[:200]!r}", None
    return _BY_CODE.get(code, ApiError)(status, code, message, field)
