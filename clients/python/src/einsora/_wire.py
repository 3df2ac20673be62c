"""What the generated models and operations use to read and write the API's JSON."""

import dataclasses
import re
import urllib.parse
from datetime import datetime, timedelta, timezone
from typing import Any

_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:\d{2})$"
)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (`2026-01-02T03:04:05.123456789Z`) as an aware datetime.

    Python before 3.11 reads neither `Z` nor nanoseconds with fromisoformat: this does, and
    keeps microseconds.
    """
    match = _TIME.match(text)
    if not match:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    day, clock, fraction, zone = match.groups()
    micros = (fraction or "").ljust(6, "0")[:6]
    zone = "+00:00" if zone in ("Z", "z") else zone
    return datetime.fromisoformat(f"{day}T{clock}.{micros}{zone}")


def format_time(value: Any) -> str:
    """A datetime as RFC 3339 in UTC (a naive one is taken as UTC); a string as it is."""
    if isinstance(value, str):
        return value
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime or an RFC 3339 string, not {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    value = value.astimezone(timezone.utc)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "Z"


def plain(value: Any) -> Any:
    """A value as JSON: models by their to_dict, datetimes as RFC 3339, None fields left out."""
    if hasattr(value, "to_dict") and dataclasses.is_dataclass(value):
        return value.to_dict()
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, timedelta):
        raise TypeError("a duration is not a time: pass a datetime")
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)


def segment(value: Any) -> str:
    """A path parameter, percent-encoded so that it stays one segment."""
    if not isinstance(value, str):
        value = str(value)
    if not value:
        raise ValueError("an ID is needed")
    return urllib.parse.quote(value, safe="")
