"""The node-to-node protocol (crates/cluster/src/wire.rs) as the black-box
tests speak it from Python: frames, the Hello, a join and its answer.

A frame is `len: u32 LE | kind: u8 | payload`, `len` counting kind and
payload. Strings are `len: u16 LE | UTF-8 bytes`.
"""
import struct

# wire.rs PROTOCOL_VERSION
PROTOCOL_VERSION = 7
MAGIC = b"DGRD"
KIND_HELLO = 1
KIND_JOIN = 5
KIND_JOINED = 6
KIND_REFUSED = 7


def wire_frame(kind, payload=b""):
    return struct.pack("<IB", len(payload) + 1, kind) + payload


def wire_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def wire_hello(node_id, cluster_addr, client_addr, site_id=1, version=PROTOCOL_VERSION,
               tls_client_addr=""):
    """Hello::encode: magic, protocol version (u16), site id (u16), node
    id, cluster address, client address, TLS client address ("" for none)
    (strings), in a KIND_HELLO frame."""
    payload = MAGIC + struct.pack("<HH", version, site_id)
    payload += wire_str(node_id) + wire_str(cluster_addr) + wire_str(client_addr)
    payload += wire_str(tls_client_addr)
    return wire_frame(KIND_HELLO, payload)


def wire_join():
    """What a joining node sends right after its hello (join::ask): an
    empty KIND_JOIN frame."""
    return wire_frame(KIND_JOIN)


def decode_join_answer(payload):
    """JoinAnswer::decode: the new member's id (u64), a member count (u16),
    then per member its id (u64) and cluster address (string)."""
    node_id, n = struct.unpack_from("<QH", payload)
    at, members = 10, []
    for _ in range(n):
        (mid,) = struct.unpack_from("<Q", payload, at)
        (ln,) = struct.unpack_from("<H", payload, at + 8)
        members.append((mid, payload[at + 10:at + 10 + ln].decode()))
        at += 10 + ln
    assert at == len(payload), f"trailing bytes in a join answer: {payload!r}"
    return node_id, members
