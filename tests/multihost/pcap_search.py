#!/usr/bin/env python3
"""Searches every byte of a capture for secrets (tests/multihost/secret_exchange.sh).

    pcap_search.py PCAP NAME=HEX ...

Reads a pcap written by sniff.py, reassembles each TCP stream (one direction of a
connection, by sequence number, so a needle split across segments is still found) and
searches the streams, and every whole frame besides, for each needle (given as hex bytes).
Prints "capture frames=F tcp_streams=S tcp_bytes=B" then "needle NAME=COUNT" per needle:
the number of streams and frames holding it."""
import struct
import sys
from collections import defaultdict


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack_from("<I", data, 0)
    if magic != 0xA1B2C3D4:
        sys.exit(f"{path}: not a little-endian microsecond pcap")
    at = 24
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from("<IIII", data, at)
        yield data[at + 16:at + 16 + incl]
        at += 16 + incl


def tcp_segment(frame):
    """(flow, seq, payload) of an Ethernet/IPv4/TCP frame, else None."""
    if len(frame) < 14 + 20 or struct.unpack_from("!H", frame, 12)[0] != 0x0800:
        return None
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    total, = struct.unpack_from("!H", ip, 2)
    if ip[9] != 6 or len(ip) < ihl + 20:
        return None
    tcp = ip[ihl:total] if total else ip[ihl:]  # total 0: a segmentation offload's large frame
    sport, dport, seq = struct.unpack_from("!HHI", tcp, 0)
    offset = (tcp[12] >> 4) * 4
    return (ip[12:16], sport, ip[16:20], dport), seq, tcp[offset:]


def streams(captured):
    segments = defaultdict(dict)  # flow -> seq -> the longest payload seen there
    first = {}
    for frame in captured:
        seg = tcp_segment(frame)
        if seg is None or not seg[2]:
            continue
        flow, seq, payload = seg
        first.setdefault(flow, seq)
        if len(payload) > len(segments[flow].get(seq, b"")):
            segments[flow][seq] = payload
    for flow, by_seq in segments.items():
        data = bytearray()
        for seq in sorted(by_seq, key=lambda s: (s - first[flow]) % 2**32):
            off, payload = (seq - first[flow]) % 2**32, by_seq[seq]
            if off + len(payload) <= len(data):
                continue
            if off > len(data):
                data += b"\0" * (off - len(data))  # a segment the capture missed
            data += payload[len(data) - off:]
        yield bytes(data)


def main():
    captured = list(frames(sys.argv[1]))
    needles = [(arg.split("=", 1)[0], bytes.fromhex(arg.split("=", 1)[1])) for arg in sys.argv[2:]]
    tcp = list(streams(captured))
    print(f"capture frames={len(captured)} tcp_streams={len(tcp)} tcp_bytes={sum(map(len, tcp))}")
    for name, needle in needles:
        count = sum(needle in s for s in tcp) + sum(needle in f for f in captured)
        print(f"needle {name}={count}")


if __name__ == "__main__":
    main()
