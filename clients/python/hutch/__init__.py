# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch: the Python client of the hutch sandbox runtime (docs/clients.md)."""

from .client import (Client, ExecResult, FileInfo, Outcome, OutputChunk, Sandbox, SandboxInfo,
                     default_socket, run)
from .terminal import Terminal
from .errors import (ApiError, Conflict, ConnectionFailed, HutchError, InvalidArgument,
                     NotFound, NotSupported, PermissionDenied, Timeout, TooLarge,
                     Unauthorized, Unavailable)

__all__ = [
    "Client", "ExecResult", "FileInfo", "Outcome", "OutputChunk", "Sandbox", "SandboxInfo",
    "default_socket", "run", "ApiError", "Conflict", "ConnectionFailed", "HutchError",
    "InvalidArgument", "NotFound", "NotSupported", "PermissionDenied", "Timeout", "TooLarge",
    "Unauthorized", "Unavailable", "Terminal",
]
