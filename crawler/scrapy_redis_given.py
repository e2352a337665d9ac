"""Telling what a user gave among scrapy-redis's settings, and refusing it by name (no Scrapy
components: the settings only)."""

from __future__ import annotations

import importlib
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.python import global_object_name


def given(settings: BaseSettings, name: str) -> bool:
    """Set by a spider or the command line (whatever its value), or by the project or the
    environment to another value than this project's default (``settings.base`` sets its
    defaults at project priority, so there a value equal to the default cannot be told
    from it)."""
    priority = settings.getpriority(name) or 0 if name in settings else 0
    if priority <= 0:
        return False
    if priority > SETTINGS_PRIORITIES["project"]:
        return True
    default = getattr(importlib.import_module("settings.base"), name, _MISSING)
    return default is _MISSING or settings.get(name) != default


_MISSING = object()


def setting_priority(settings: BaseSettings, name: str) -> int:
    return settings.getpriority(name) or 0


def object_path(value: Any) -> str:
    """A class setting's dotted path, given as the path or as the class (Scrapy and scrapy-redis
    take both: a class was judged as a string, ``PriorityQueue`` refused)."""
    if isinstance(value, str) or not hasattr(value, "__qualname__"):
        return str(value or "")
    return global_object_name(value)


def refuse(name: str, value: Any, instead: str) -> ValueError:
    """``name`` (a scrapy-redis setting, or one scrapy-redis users set) given ``value``, which
    cannot work here: ``instead``, what to do."""
    return ValueError(f"{name}={value!r}, as scrapy-redis takes it, cannot work here: {instead}")
