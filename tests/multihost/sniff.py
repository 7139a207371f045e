#!/usr/bin/env python3
"""Counts the packets on one interface that carry a marker in clear (tests/multihost).

    sniff.py IFACE MARKER STOPFILE

Captures every frame on IFACE (an AF_PACKET socket: run it inside the namespace, e.g.
`testbed.sh exec ID 0 sniff.py eth0 ...`) until STOPFILE exists, then prints
"sniff iface=IFACE frames=F bytes=B marker_frames=M". A frame counts when it holds the whole
marker; the senders repeat it, so a cleartext stream of it cannot go unseen. Prints
"sniff ready" once capturing, so the caller knows when to start the traffic."""
import os
import socket
import sys

ETH_P_ALL = 0x0003


def main():
    iface, marker, stopfile = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    sock.settimeout(0.2)
    frames = total = hits = 0
    print("sniff ready", flush=True)
    while not os.path.exists(stopfile):
        try:
            frame = sock.recv(1 << 17)
        except socket.timeout:
            continue
        frames += 1
        total += len(frame)
        hits += marker in frame
    print(f"sniff iface={iface} frames={frames} bytes={total} marker_frames={hits}", flush=True)


if __name__ == "__main__":
    main()
