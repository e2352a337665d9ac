"""The project's settings (``settings.base``) for a crawler built in the test's own process."""

from __future__ import annotations

from typing import Any

from settings import base


def base_values(**overrides: Any) -> dict[str, Any]:
    """``settings.base``'s values, and ``overrides``. No metrics server: a crawler whose crawl
    is refused at start or never runs holds its port for the rest of the session (41 of
    METRICS_PORTS; CI ran out)."""
    values = {name: value for name, value in vars(base).items() if name.isupper()}
    return values | {"METRICS_ENABLED": False} | overrides
