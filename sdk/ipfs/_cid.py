"""CIDs, written by hand: CIDv1 (multibase base32) and CIDv0 (base58btc) with sha2-256.

A CID is `<version varint><codec varint><multihash>`, multihash = `<0x12 sha2-256><0x20 length><digest>`.
CIDv1 strings are multibase base32 lower case (prefix "b"); CIDv0 is the bare base58btc multihash
("Qm...", always dag-pb). Only sha2-256 is read: it is what `ipfs add` uses by default.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from .._errors import InvalidCidError

__all__ = ["DAG_PB", "RAW", "SHA2_256", "Cid", "decode_varint", "encode_varint"]

RAW = 0x55
DAG_PB = 0x70
SHA2_256 = 0x12
_CODEC_NAMES = {RAW: "raw", DAG_PB: "dag-pb"}
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def encode_varint(n: int) -> bytes:
    """Unsigned LEB128, as multiformats and protobuf use."""
    if n < 0:
        raise ValueError("varint must be >= 0")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int]:
    """Return (value, next position); raises ValueError on a truncated or over-long varint."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def _b58decode(s: str) -> bytes:
    n = 0
    for ch in s:
        i = _B58.find(ch)
        if i < 0:
            raise ValueError(f"invalid base58 character {ch!r}")
        n = n * 58 + i
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    pad = len(s) - len(s.lstrip("1"))
    return b"\x00" * pad + raw


def _b58encode(b: bytes) -> str:
    n = int.from_bytes(b, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = _B58[r] + out
    pad = len(b) - len(b.lstrip(b"\x00"))
    return "1" * pad + out


@dataclass(frozen=True, slots=True)
class Cid:
    """A parsed CID (sha2-256 only). `str(cid)` gives the canonical CIDv1 base32 text for v1."""

    version: int
    codec: int
    digest: bytes

    @classmethod
    def of(cls, block: bytes | memoryview, codec: int = RAW) -> Cid:
        """The CIDv1 of a block's bytes under `codec`."""
        return cls(1, codec, hashlib.sha256(block).digest())

    @classmethod
    def parse(cls, text: str | Cid) -> Cid:
        """Parse CID text (CIDv1 base32 "b...", CIDv0 "Qm..."); raise InvalidCidError otherwise."""
        if isinstance(text, Cid):
            return text
        if not isinstance(text, str) or not text:
            raise InvalidCidError(f"not a CID: {text!r} (expected a string like 'bafk...' or 'Qm...')")
        try:
            if len(text) == 46 and text.startswith("Qm"):
                return cls._from_multihash(0, DAG_PB, _b58decode(text))
            if text[0] in "bB":
                body = text[1:].lower()
                raw = base64.b32decode(body.upper() + "=" * (-len(body) % 8))
                return cls.from_bytes(raw)
            if text[0] == "z":
                return cls.from_bytes(_b58decode(text[1:]))
        except (ValueError, base64.binascii.Error) as exc:  # InvalidCidError is a ValueError too
            raise InvalidCidError(f"not a CID: {text!r} ({exc})") from None
        raise InvalidCidError(
            f"not a CID this SDK reads: {text!r} (use CIDv1 base32 'b...' or CIDv0 'Qm...')"
        )

    @classmethod
    def from_bytes(cls, raw: bytes) -> Cid:
        """Parse a binary CID (as found in dag-pb links)."""
        if len(raw) == 34 and raw[0] == SHA2_256 and raw[1] == 0x20:
            return cls._from_multihash(0, DAG_PB, raw)
        try:
            version, pos = decode_varint(raw)
            if version != 1:
                raise InvalidCidError(f"unsupported CID version {version}")
            codec, pos = decode_varint(raw, pos)
        except ValueError as exc:
            raise InvalidCidError(f"malformed binary CID: {exc}") from None
        return cls._from_multihash(1, codec, raw[pos:])

    @classmethod
    def _from_multihash(cls, version: int, codec: int, mh: bytes) -> Cid:
        try:
            fn, pos = decode_varint(mh)
            length, pos = decode_varint(mh, pos)
        except ValueError as exc:
            raise InvalidCidError(f"malformed multihash: {exc}") from None
        if fn != SHA2_256:
            raise InvalidCidError(f"unsupported hash function 0x{fn:x} (only sha2-256 is read)")
        digest = bytes(mh[pos:])
        if length != 32 or len(digest) != 32:
            raise InvalidCidError(f"sha2-256 digest must be 32 bytes, got {len(digest)}")
        if codec not in _CODEC_NAMES:
            raise InvalidCidError(f"unsupported codec 0x{codec:x} (only raw and dag-pb are read)")
        return cls(version, codec, digest)

    @property
    def multihash(self) -> bytes:
        return bytes([SHA2_256, 32]) + self.digest

    @property
    def codec_name(self) -> str:
        return _CODEC_NAMES.get(self.codec, hex(self.codec))

    def to_bytes(self) -> bytes:
        if self.version == 0:
            return self.multihash
        return encode_varint(1) + encode_varint(self.codec) + self.multihash

    def to_v1(self) -> Cid:
        return Cid(1, self.codec, self.digest)

    def __str__(self) -> str:
        if self.version == 0:
            return _b58encode(self.multihash)
        return "b" + base64.b32encode(self.to_bytes()).decode().lower().rstrip("=")

    def matches(self, block: bytes | memoryview) -> bool:
        """True when `block` hashes to this CID's digest."""
        return hashlib.sha256(block).digest() == self.digest
