#!/usr/bin/env python3
"""Captures every frame on one interface (tests/multihost).

    sniff.py IFACE MARKER STOPFILE [PCAP]

Captures every frame on IFACE (an AF_PACKET socket: run it inside the namespace, e.g.
`testbed.sh exec ID 0 sniff.py eth0 ...`) until STOPFILE exists, then prints
"sniff iface=IFACE frames=F bytes=B marker_frames=M". A frame counts when it holds the whole
marker; the senders repeat it, so a cleartext stream of it cannot go unseen (an empty MARKER
counts every frame). With PCAP, every frame is also written there (pcap format, Ethernet
link type) for pcap_search.py. Prints "sniff ready" once capturing, so the caller knows when
to start the traffic."""
import os
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SNAPLEN = 1 << 18  # above the largest frame a segmentation offload hands the socket (64 KiB)


def main():
    iface, marker, stopfile = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
    pcap = open(sys.argv[4], "wb") if len(sys.argv) > 4 else None
    if pcap:  # magic, version 2.4, GMT, accuracy, snaplen, LINKTYPE_ETHERNET
        pcap.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, 1))
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    sock.settimeout(0.2)
    frames = total = hits = 0
    print("sniff ready", flush=True)
    while not os.path.exists(stopfile):
        try:
            frame = sock.recv(SNAPLEN)
        except socket.timeout:
            continue
        frames += 1
        total += len(frame)
        hits += marker in frame
        if pcap:
            now = time.time()
            pcap.write(struct.pack("<IIII", int(now), int(now % 1 * 1e6), len(frame), len(frame)) + frame)
    if pcap:
        pcap.close()
    print(f"sniff iface={iface} frames={frames} bytes={total} marker_frames={hits}", flush=True)


if __name__ == "__main__":
    main()
