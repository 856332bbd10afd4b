"""The P4 programs' path hashes, as bmv2 computes them, over numpy arrays of packets' fields.

Both programs call `hash(out, HashAlgorithm.crc32, 16w0, {fields}, 32w65536)` into a bit<16>: bmv2
serializes the fields big-endian, in the list's order, into one byte string (every field here is whole
bytes), takes the standard CRC-32 of it (reflected, polynomial 0x04C11DB7, init and final XOR 0xFFFFFFFF:
zlib.crc32; the check value of b"123456789" is 0xCBF43926) and keeps base + crc mod 65536, the low 16
bits. tests/bmv2/p4/test_srv6_spray.py checks that equality against simple_switch (the flow label of an
encapsulated packet is that hash). The selector's identity hash then picks member hash mod the group size,
members in the order the controller created them: ascending spine index (routes.py, member id spine + 1).

    eecmp_qp_hash.p4  FIVE_TUPLE: l3_src(128) l3_dst(128) proto(8) sport(16) dport(16)        IPv4 mapped ::ffff:a.b.c.d
                      QP:         ... dport(16) bth.dest_qp(24)
    srv6_spray.p4     FLOW / QP / PACKET: ipv6 src dst next_hdr sport dport [dest_qp] [psn]
"""

from __future__ import annotations

import numpy as np

ROCE_PORT = 4791
UDP = 17


def _table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0xEDB88320), t >> 1).astype(np.uint32)
    return t


_TABLE = _table()


def crc32_rows(data: np.ndarray) -> np.ndarray:
    """The CRC-32 of each row of a (rows, bytes) uint8 array (zlib.crc32 of each row's bytes)."""
    rows = np.asarray(data, dtype=np.uint8)
    crc = np.full(rows.shape[0], 0xFFFFFFFF, dtype=np.uint32)
    for k in range(rows.shape[1]):
        crc = _TABLE[(crc ^ rows[:, k]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def be_bytes(values: np.ndarray | int, width: int, rows: int) -> np.ndarray:
    """(rows, width) uint8: each value big-endian in `width` bytes (values up to 64 bits)."""
    v = np.broadcast_to(np.asarray(values, dtype=np.uint64), (rows,))
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint64) * np.uint64(8)
    return ((v[:, None] >> shifts[None, :]) & np.uint64(0xFF)).astype(np.uint8)


def v4_mapped(v4: np.ndarray, rows: int) -> np.ndarray:
    """(rows, 16) uint8: IPv4 addresses as ::ffff:a.b.c.d (eecmp_qp_hash's l3_src/l3_dst)."""
    out = np.zeros((rows, 16), dtype=np.uint8)
    out[:, 10:12] = 0xFF
    out[:, 12:] = be_bytes(v4, 4, rows)
    return out


def v6_bytes(hi: np.ndarray | int, lo: np.ndarray | int, rows: int) -> np.ndarray:
    """(rows, 16) uint8 from the high and low 64 bits of IPv6 addresses."""
    return np.concatenate([be_bytes(hi, 8, rows), be_bytes(lo, 8, rows)], axis=1)


def hash16(fields: list[np.ndarray]) -> np.ndarray:
    """bmv2's crc32 hash into bit<16> (base 0, max 65536) of the concatenated field bytes."""
    return (crc32_rows(np.concatenate(fields, axis=1)) & np.uint32(0xFFFF)).astype(np.int64)


def eecmp(src_v4: np.ndarray, dst_v4: np.ndarray, sport: np.ndarray | int, dest_qp: np.ndarray | None,
          dport: int = ROCE_PORT) -> np.ndarray:
    """eecmp_qp_hash.p4's ecmp_hash: FIVE_TUPLE when dest_qp is None, else QP (E-ECMP)."""
    n = len(src_v4)
    fields = [v4_mapped(src_v4, n), v4_mapped(dst_v4, n), be_bytes(UDP, 1, n), be_bytes(sport, 2, n),
              be_bytes(dport, 2, n)]
    if dest_qp is not None:
        fields.append(be_bytes(dest_qp, 3, n))
    return hash16(fields)


def spray(src_v6: tuple[np.ndarray | int, np.ndarray | int], dst_v6: tuple[np.ndarray | int, np.ndarray | int],
          sport: np.ndarray | int, rows: int, dest_qp: np.ndarray | None = None, psn: np.ndarray | None = None,
          dport: int = ROCE_PORT) -> np.ndarray:
    """srv6_spray.p4's spray_hash: FLOW (no QP), QP (dest_qp), PACKET (dest_qp and psn); addresses as (hi, lo)."""
    fields = [v6_bytes(*src_v6, rows), v6_bytes(*dst_v6, rows), be_bytes(UDP, 1, rows), be_bytes(sport, 2, rows),
              be_bytes(dport, 2, rows)]
    if dest_qp is not None:
        fields.append(be_bytes(dest_qp, 3, rows))
        if psn is not None:
            fields.append(be_bytes(psn, 3, rows))
    return hash16(fields)
