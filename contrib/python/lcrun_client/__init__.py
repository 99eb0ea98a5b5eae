"""lcrun_client — lcd's sandbox API from Python (stdlib only).  See client.py."""
from .client import (Client, CommandFailed, Conflict, ExecResult, Forbidden, LcdError, NotFound,
                     QuotaExceeded, Sandbox, Session, UnsafeArchive)

__version__ = "0.1.0"
__all__ = ["Client", "Sandbox", "Session", "ExecResult", "CommandFailed", "LcdError", "NotFound", "Forbidden",
           "Conflict", "QuotaExceeded", "UnsafeArchive"]
