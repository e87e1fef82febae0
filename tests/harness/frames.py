"""Hand-made Ethernet frames, sent and received on a pod's interface with
an AF_PACKET socket: how a test plays a pod that lies about its addresses.
Run inside a pod's namespace (``ip netns exec``):

    python3 frames.py listen IFACE TIMEOUT STOP_PAYLOAD...
        prints "ready", then one JSON line per UDP or ARP frame seen, and
        exits once every STOP_PAYLOAD has arrived (or TIMEOUT passed)
    python3 frames.py send IFACE JSON
        sends the frames JSON describes, in order:
        [{"kind": "udp"|"arp", "src_mac", "dst_mac", "src_ip", "dst_ip", "payload", "vlan"?}]
        ("vlan": an 802.1Q tag with that VID, as a trunk's VNF writes it)

A frame seen carries its VLAN (``"vlan"``), whether the kernel left the tag
in the frame or took it into the socket's auxiliary data (veths do).

Only the standard library: it runs with the system's python3.
"""

import json
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
SOL_PACKET, PACKET_AUXDATA = 263, 8
TP_STATUS_VLAN_VALID = 1 << 4
# struct tpacket_auxdata: status, len, snaplen, mac, net, vlan_tci, vlan_tpid
AUXDATA = struct.Struct("IIIHHHH")


def mac_bytes(text):
    return bytes(int(part, 16) for part in text.split(":"))


def mac_text(data):
    return ":".join("%02x" % b for b in data)


def checksum(header):
    total = sum(struct.unpack("!%dH" % (len(header) // 2), header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_frame(src_mac, dst_mac, src_ip, dst_ip, payload):
    data = payload.encode()
    udp = struct.pack("!HHHH", 40000, 40001, 8 + len(data), 0) + data
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                         socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + struct.pack("!H", ETH_P_IP) + header + udp


def arp_frame(src_mac, dst_mac, src_ip, dst_ip, payload=None):
    """A gratuitous ARP reply: ``src_mac`` claims ``src_ip``."""
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 2, mac_bytes(src_mac), socket.inet_aton(src_ip),
                      mac_bytes(dst_mac), socket.inet_aton(dst_ip))
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + struct.pack("!H", ETH_P_ARP) + arp


def tagged(frame, vlan):
    """``frame`` with an 802.1Q tag of VID ``vlan`` after its MACs."""
    return frame[:12] + struct.pack("!HH", ETH_P_8021Q, vlan & 0x0FFF) + frame[12:]


def parse(frame, vlan=None):
    """What a frame says (None for what this does not read); its VLAN, a
    tag in the frame or ``vlan`` (from the auxiliary data)."""
    if struct.unpack("!H", frame[12:14])[0] == ETH_P_8021Q:
        vlan, frame = struct.unpack("!H", frame[14:16])[0] & 0x0FFF, frame[:12] + frame[16:]
    seen = _parse(frame)
    if seen is not None and vlan is not None:
        seen["vlan"] = vlan
    return seen


def _parse(frame):
    kind = struct.unpack("!H", frame[12:14])[0]
    src_mac = mac_text(frame[6:12])
    if kind == ETH_P_ARP and len(frame) >= 42:
        return {"kind": "arp", "src_mac": src_mac, "sha": mac_text(frame[22:28]),
                "spa": socket.inet_ntoa(frame[28:32])}
    if kind == ETH_P_IP and len(frame) >= 42 and frame[23] == 17:
        length = (frame[14] & 0x0F) * 4
        udp = frame[14 + length:]
        return {"kind": "udp", "src_mac": src_mac, "src_ip": socket.inet_ntoa(frame[26:30]),
                "payload": udp[8:].decode(errors="replace")}
    return None


def listen(iface, timeout, stops):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    sock.bind((iface, 0))
    print("ready", flush=True)
    waiting = set(stops)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        ready, _w, _x = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        frame, ancillary, _flags, address = sock.recvmsg(65535, socket.CMSG_SPACE(AUXDATA.size))
        if address[2] == socket.PACKET_OUTGOING:
            continue
        vlan = None
        for level, kind, data in ancillary:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= AUXDATA.size:
                status, _l, _s, _m, _n, tci, _tpid = AUXDATA.unpack(data[:AUXDATA.size])
                if status & TP_STATUS_VLAN_VALID:
                    vlan = tci & 0x0FFF
        seen = parse(frame, vlan)
        if seen:
            print(json.dumps(seen), flush=True)
            waiting.discard(seen.get("payload"))
    return 0 if not waiting else 1


def send(iface, frames):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    for item in frames:
        build = udp_frame if item["kind"] == "udp" else arp_frame
        frame = build(item["src_mac"], item["dst_mac"], item["src_ip"], item["dst_ip"], item.get("payload"))
        sock.send(tagged(frame, item["vlan"]) if item.get("vlan") is not None else frame)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        raise SystemExit(listen(sys.argv[2], float(sys.argv[3]), sys.argv[4:]))
    raise SystemExit(send(sys.argv[2], json.loads(sys.argv[3])))
