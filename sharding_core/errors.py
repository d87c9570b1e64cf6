"""Errors as data: every way an input can be wrong carries a code, a message and a hint.

The HTTP layer turns a :class:`ShardingError` into a 4xx body
``{"error": {"code", "message", "hint", ...details}}``; the CLI prints it. Messages say what was
found and what is allowed ("got X, allowed Y"), in the style of JAX's own ``_check_*`` errors.
"""

from __future__ import annotations

from typing import Any

# The stable codes users and the HTTP contract rely on.
PARSE_ERROR = "parse_error"
UNKNOWN_AXIS = "unknown_axis"
DUPLICATE_AXIS = "duplicate_axis"
RANK_MISMATCH = "rank_mismatch"
INDIVISIBLE = "indivisible"
TOO_LARGE = "too_large"
BAD_DEVICES = "bad_devices"
BAD_MESH = "bad_mesh"
BAD_AXIS_NAME = "bad_axis_name"
BAD_SHAPE = "bad_shape"
BAD_DTYPE = "bad_dtype"
MESH_UNPLACEABLE = "mesh_unplaceable"
NOT_FOUND = "not_found"


class ShardingError(ValueError):
    """A user-facing error: ``code`` (snake_case), ``message``, optional ``hint`` and details.

    ``details`` holds JSON-serialisable extras such as ``column`` for parse errors or
    ``suggestions`` for indivisible dimensions.
    """

    def __init__(self, code: str, message: str, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        out.update(self.details)
        return out

    def __str__(self) -> str:
        text = self.message
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text
