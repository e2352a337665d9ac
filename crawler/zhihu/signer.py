"""The ``x-zse-96`` request signature: a pluggable :class:`Signer` and the public 2.0 algorithm.

Zhihu signs API calls with ``x-zse-93: 101_3_3.0`` and ``x-zse-96: 2.0_<64 chars>``. The input
is ``"101_3_3.0+" + path?query (as sent) + "+" + d_c0``, hashed with MD5. The default
:class:`Zse96Signer` encodes the 32-character hex digest the way Zhihu's web bundle does (the
scheme reverse-engineered publicly many times; see docs/zhihu.md "Signer"):

1. plaintext (48 bytes): a random nonce byte in ``[0, 127)``, a zero byte, the hex digest as
   ASCII, then 14 bytes of value 14 (PKCS#7 padding to three 16-byte blocks);
2. CBC encryption with a fixed IV (``"059053f7d15e01d7"`` XOR 42, byte by byte) and a block
   cipher of the SM4 structure (32 rounds) with Zhihu's own S-box and round keys;
3. every fourth byte of the ciphertext (3, 7, ..., 47) XOR 58, then the bytes reversed;
4. each 3 bytes, read little-endian as 24 bits, become 4 characters of a custom alphabet
   (lowest 6 bits first): 48 bytes -> 64 characters.

The nonce makes the output differ at every call, as the browser's does. Zhihu may change any of
this with a new bundle; a rejected signature is counted as ``zhihu/signer_error/<endpoint>``.
"""

from __future__ import annotations

import hashlib
import importlib
import secrets
from collections.abc import Callable
from typing import Protocol, runtime_checkable

SIGNATURE_VERSION = "101_3_3.0"  # the x-zse-93 header
SIGNATURE_PREFIX = "2.0_"

NONCE_LIMIT = 127  # the nonce byte is in [0, NONCE_LIMIT), like floor(Math.random() * 127)
_ALPHABET = "6fpLRqJO8M/c3jnYxFkUVC4ZIG12SiH=5v0mXDazWBTsuw7QetbKdoPyAl+hN9rgE"  # [64] unused
_IV = bytes(byte ^ 42 for byte in b"059053f7d15e01d7")
_PADDING = bytes([14]) * 14
_MASKED_BYTE = 58  # XORed into every fourth ciphertext byte
_BLOCK = 16
_SIGNED_BYTES = 48
_WORD = 0xFFFFFFFF
_SBOX = bytes.fromhex(
    "14dff507f802c2d15706e3fdf080de5bed097d9de65dfccd5a4f90c79fc5baa7"
    "27259cc6262a2ba8d9990f6750bd47bf6154f75f24450e230cab1c72b29456b6"
    "20539e6d16ff5eee97554d7cfe12041a7bb0e8c183ac8f8e961e0a92a23ee0da"
    "c4e501c0d51b6e38e7b48a6bf2bb3678132c75e4d7cb35effb7f510b8560cc84"
    "29734937f99366307a916a764abe1d10ae05b1813f71631fa14cf622d30d3c44"
    "cfa0416f52a543a9e13970f49b33ecc8e93a3d2f6489b9401146eaa3db6caaa6"
    "3b95346918d44ead2d0074e27788ce87afc3195c79d07e8b034b8d158262f128"
    "9a42b831b52ef35865b7081748bc68b3d286fac9a459d8cadc32dd988c21ebd6"
)
_ROUND_KEYS = (
    0x45C62932, 0x3D15F2FE, 0x5442E14F, 0xEB8921C0, 0xD256542E, 0xAE28CBDE, 0xF7782B08, 0xEE48A883,
    0x733E8D1A, 0xC61CDFFB, 0xE7C6016A, 0x1B713876, 0xDF5EEB0A, 0x8F44A6CA, 0x9BEB07A3, 0x7E564E94,
    0x870BCBCB, 0x794D026C, 0xA54F723A, 0xFFAABF19, 0xFB5D9CC3, 0x832A8363, 0xB5E884FA, 0x5E2B60CF,
    0x4EC93B52, 0x1B3A7714, 0xAD0D330F, 0xF2551FDF, 0x13AB7196, 0xD0F96ADE, 0x15AB9F7D, 0x8BE5D87B,
)  # fmt: skip


def signature_input(version: str, path_with_query: str, d_c0: str) -> str:
    return f"{version}+{path_with_query}+{d_c0}"


@runtime_checkable
class Signer(Protocol):
    """Signs one API request; built once per node with no arguments."""

    version: str  # the x-zse-93 value

    def sign(self, path_with_query: str, d_c0: str) -> str:
        """The ``x-zse-96`` value for ``path?query`` exactly as sent and the ``d_c0`` cookie."""
        ...


class Zse96Signer:
    """MD5 of the public input, encoded by :func:`encode_digest` with a fresh random nonce."""

    version = SIGNATURE_VERSION

    def __init__(self, nonce: Callable[[], int] | None = None) -> None:
        self._nonce = nonce or _random_nonce

    def sign(self, path_with_query: str, d_c0: str) -> str:
        digest = hashlib.md5(  # Zhihu's scheme, not a security choice of ours
            signature_input(self.version, path_with_query, d_c0).encode()
        ).hexdigest()
        return SIGNATURE_PREFIX + encode_digest(digest, self._nonce())


def _random_nonce() -> int:
    return secrets.randbelow(NONCE_LIMIT)


def encode_digest(digest: str, nonce: int) -> str:
    """The 64 characters after ``2.0_`` for a 32-character MD5 hex ``digest`` (steps 1-4 above)."""
    if len(digest) != 32 or not 0 <= nonce < NONCE_LIMIT:
        raise ValueError(f"cannot encode digest {digest!r} with nonce {nonce}")
    plaintext = bytes([nonce, 0]) + digest.encode("ascii") + _PADDING
    ciphertext, previous = bytearray(), _IV
    for start in range(0, _SIGNED_BYTES, _BLOCK):
        block = plaintext[start : start + _BLOCK]
        previous = _cipher(bytes(a ^ b for a, b in zip(block, previous, strict=True)), _ROUND_KEYS)
        ciphertext += previous
    data = _masked(ciphertext[::-1])
    chars: list[str] = []
    for start in range(0, _SIGNED_BYTES, 3):
        bits = int.from_bytes(data[start : start + 3], "little")
        chars.extend(_ALPHABET[(bits >> shift) & 63] for shift in (0, 6, 12, 18))
    return "".join(chars)


def signed_digest(value: str) -> str | None:
    """The MD5 hex digest inside a 2.0 ``x-zse-96`` value, or None (for verifiers and tests)."""
    body = value.removeprefix(SIGNATURE_PREFIX)
    if body == value or len(body) != 64 or not set(body) <= set(_ALPHABET[:64]):
        return None
    data = bytearray()
    for start in range(0, 64, 4):
        bits = sum(_ALPHABET.index(char) << 6 * i for i, char in enumerate(body[start : start + 4]))
        data += bits.to_bytes(3, "little")
    ciphertext = bytes(_masked(data))[::-1]
    inverse_keys = _ROUND_KEYS[::-1]
    plaintext = bytearray()
    for start in range(0, _SIGNED_BYTES, _BLOCK):
        previous = ciphertext[start - _BLOCK : start] if start else _IV
        block = _cipher(ciphertext[start : start + _BLOCK], inverse_keys)
        plaintext += bytes(a ^ b for a, b in zip(block, previous, strict=True))
    digest = plaintext[2:34].decode("ascii", "replace")
    ok = plaintext[1] == 0 and plaintext[0] < NONCE_LIMIT and plaintext[34:] == _PADDING
    return digest if ok else None


def _masked(data: bytes | bytearray) -> bytearray:
    """XOR 58 into bytes 0, 4, ..., 44 of the reversed ciphertext (its own inverse)."""
    out = bytearray(data)
    for index in range(0, _SIGNED_BYTES, 4):
        out[index] ^= _MASKED_BYTE
    return out


def _cipher(block: bytes, round_keys: tuple[int, ...]) -> bytes:
    """One 16-byte block through the SM4 structure; the round keys reversed decrypt."""
    words = [int.from_bytes(block[i : i + 4], "big") for i in range(0, _BLOCK, 4)]
    for key in round_keys:
        words.append(words[-4] ^ _round(words[-3] ^ words[-2] ^ words[-1] ^ key))
    return b"".join(word.to_bytes(4, "big") for word in reversed(words[-4:]))


def _round(word: int) -> int:
    """S-box on each byte, then the linear mix x ^ x<<<2 ^ x<<<10 ^ x<<<18 ^ x<<<24."""
    mixed = int.from_bytes(bytes(_SBOX[byte] for byte in word.to_bytes(4, "big")), "big")
    return mixed ^ _rotl(mixed, 2) ^ _rotl(mixed, 10) ^ _rotl(mixed, 18) ^ _rotl(mixed, 24)


def _rotl(word: int, bits: int) -> int:
    return ((word << bits) | (word >> (32 - bits))) & _WORD


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
