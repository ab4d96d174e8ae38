import socket, struct
conf = "absent"
try:
    with open("/etc/resolv.conf") as f:
        ns = [l.split()[1] for l in f if l.startswith("nameserver") and len(l.split()) > 1]
    conf = "none" if not ns else ("loopback" if all(n.startswith("127.") or n == "::1" for n in ns) else "network")
except FileNotFoundError:
    pass
except OSError:
    conf = "unreadable"
q = struct.pack(">HHHHHH", 0x4157, 0x0100, 1, 0, 0, 0)
for label in (b"awf-verify", b"invalid"):
    q += bytes([len(label)]) + label
q += b"\x00" + struct.pack(">HH", 1, 1)
res = "other"
try:
    step("socket")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    step("query")
    s.sendto(q, ("127.0.0.1", <% .DNSPort %>))
    r = s.recvfrom(512)[0]
    res = "answered" if r[:2] == q[:2] else "garbled"
except socket.timeout:
    res = "ETIMEDOUT"
except OSError as e:
    res = oserr(e)
answer({"resolv_conf": conf, "query": res if res in KNOWN or res in ("answered", "garbled") else "other"})
