"""The one error type users see.

A :class:`SwellError` names the file (or object) at fault and says what is
wrong in one line. The CLI prints ``swell: <where>: <what>`` and exits with
status 2 (bad input) without a traceback unless ``--debug`` is given. Code
raises it for anything a user can fix; programming errors stay ordinary
exceptions and do get a traceback.
"""

from __future__ import annotations

import os


class SwellError(Exception):
    """A user-facing error: ``where`` (a path or name) and a one-line message."""

    exit_code = 2

    def __init__(self, where: str | os.PathLike[str] | None, message: str) -> None:
        self.where = os.fspath(where) if where is not None else None
        self.message = " ".join(str(message).split())
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class EnvironmentProblem(SwellError):
    """The host lacks something swell needs (a tool, a kernel feature, root)."""

    exit_code = 3
