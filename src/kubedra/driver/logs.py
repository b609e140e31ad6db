"""Structured logs of the node agent: one line per event, `key=value` pairs or JSON lines.

Call sites log an event name plus fields: `log_event(log, "claim prepared", claim=uid)`.
`configure_logging(json_lines=True)` switches the root handler to JSON lines (one object per
line: ts, level, logger, msg and the fields), for log shippers; the default is logfmt-style.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LOGGER_NAME = "kubedra.driver"
_FIELDS = "kubedra_fields"


def get_logger(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `event` with structured fields (kept apart from the message for the formatters)."""
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={_FIELDS: fields})


def log_bug(logger: logging.Logger, event: str, err: BaseException, **fields: Any) -> None:
    """Log `event` as an error with the traceback of `err` (a failure that is a bug, not
    the environment)."""
    logger.error(event, exc_info=err, extra={_FIELDS: fields})


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text)
    return text


class KeyValueFormatter(logging.Formatter):
    """`ts=... level=info logger=kubedra.driver msg="claim prepared" claim=...`."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [
            f"ts={ts}.{int(record.msecs):03d}Z",
            f"level={record.levelname.lower()}",
            f"logger={record.name}",
            f"msg={_quote(record.getMessage())}",
        ]
        fields: dict[str, Any] = getattr(record, _FIELDS, {})
        parts += [f"{k}={_quote(v)}" for k, v in fields.items()]
        if record.exc_info:
            parts.append(f"error={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


class JsonLinesFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        data.update(getattr(record, _FIELDS, {}))
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, sort_keys=False)


def configure_logging(level: int = logging.INFO, json_lines: bool = False) -> None:
    """Send the driver's logs to stderr in the chosen format (idempotent)."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level)
    for handler in list(logger.handlers):
        if getattr(handler, "_kubedra", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLinesFormatter() if json_lines else KeyValueFormatter())
    handler._kubedra = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
