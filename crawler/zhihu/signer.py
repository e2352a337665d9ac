"""The ``x-zse-96`` request signature: a pluggable :class:`Signer` and a stand-in default.

Zhihu signs API calls with ``x-zse-93: 101_3_3.0`` and ``x-zse-96: 2.0_<64 chars>``. The input
is public: ``"101_3_3.0+" + path?query (as sent) + "+" + d_c0``, hashed with MD5. The custom
encoding that turns the digest into the 64 characters is *not* in our notes, so the default
:class:`StandInSigner` uses a documented stand-in encoding with the same output format:
base64 of the 32-character MD5 hex digest followed by 16 random bytes (48 bytes -> 64
characters; random like the real output). Real Zhihu rejects it (10003, counted as
``zhihu/signer_error/<endpoint>``): plug a real implementation in with ``ZHIHU_SIGNER``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
from typing import Protocol, runtime_checkable

SIGNATURE_VERSION = "101_3_3.0"  # the x-zse-93 header
SIGNATURE_PREFIX = "2.0_"


def signature_input(version: str, path_with_query: str, d_c0: str) -> str:
    return f"{version}+{path_with_query}+{d_c0}"


@runtime_checkable
class Signer(Protocol):
    """Signs one API request; built once per node with no arguments."""

    version: str  # the x-zse-93 value

    def sign(self, path_with_query: str, d_c0: str) -> str:
        """The ``x-zse-96`` value for ``path?query`` exactly as sent and the ``d_c0`` cookie."""
        ...


class StandInSigner:
    """MD5 of the public input; the stand-in encoding described in the module docstring."""

    version = SIGNATURE_VERSION

    def sign(self, path_with_query: str, d_c0: str) -> str:
        digest = hashlib.md5(  # Zhihu's scheme, not a security choice of ours
            signature_input(self.version, path_with_query, d_c0).encode()
        ).hexdigest()
        payload = digest.encode("ascii") + os.urandom(16)
        return SIGNATURE_PREFIX + base64.b64encode(payload).decode("ascii")


def stand_in_digest(value: str) -> str | None:
    """The MD5 hex digest inside a :class:`StandInSigner` value (for verifiers and tests)."""
    if not value.startswith(SIGNATURE_PREFIX):
        return None
    try:
        payload = base64.b64decode(value[len(SIGNATURE_PREFIX) :], validate=True)
    except ValueError:
        return None
    return payload[:32].decode("ascii", "replace") if len(payload) == 48 else None


def load_signer(path: str) -> Signer:
    """Instantiate ``ZHIHU_SIGNER`` (``module.Class``); errors name the setting."""
    module_name, _, class_name = path.rpartition(".")
    try:
        signer = getattr(importlib.import_module(module_name), class_name)()
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"ZHIHU_SIGNER={path!r} cannot be loaded: {exc}") from exc
    if not isinstance(signer, Signer):
        raise ValueError(f"ZHIHU_SIGNER={path!r} has no 'version' and 'sign(path, d_c0)'")
    return signer
