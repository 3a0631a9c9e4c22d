"""A tiny raw-protocol NATS client for tests/k8s_sim.rs, run inside a pod's network namespace.

    client.py pub|sub STATUS_FILE HOME_NAME SERVICE_NAME SUBJECT LIFETIME_S

It connects to HOME_NAME:4222 first, else to any address SERVICE_NAME resolves to (through the
pod's resolv.conf, i.e. the simulated cluster DNS). On a lame-duck INFO (`"ldm": true`) it moves
to another server at once; on a closed or failed connection it reconnects, trying every address.
`pub` publishes a sequence number every 5 ms; `sub` subscribes and records the longest gap
between two received messages. Both rewrite STATUS_FILE (JSON) every 100 ms and exit after
LIFETIME_S seconds whatever happens (a safety net if the test itself is killed).
"""
import json
import os
import select
import socket
import sys
import time

mode, status_path, home, service, subject = sys.argv[1:6]
lifetime = float(sys.argv[6])
PORT = 4222
PUB_EVERY = 0.005

start = time.monotonic()
st = {
    "mode": mode, "connected": False, "server": None, "reconnects": 0, "ldm_moves": 0,
    "failed_connects": 0, "sent": 0, "count": 0, "last_seq": 0, "missing": 0, "dups": 0,
    "max_gap": 0.0, "max_gap_at": 0.0, "gaps": [], "since_last_rx": None, "events": [],
}
last_rx = None


def event(text):
    st["events"].append("%.3f %s" % (time.monotonic() - start, text))
    del st["events"][:-40]


def candidates(avoid):
    ips = []
    for name in (home, service):
        try:
            for ai in socket.getaddrinfo(name, PORT, socket.AF_INET, socket.SOCK_STREAM):
                if ai[4][0] not in ips:
                    ips.append(ai[4][0])
        except OSError:
            pass
    return [ip for ip in ips if ip != avoid] + [ip for ip in ips if ip == avoid]


def connect(avoid):
    for ip in candidates(avoid):
        try:
            s = socket.create_connection((ip, PORT), timeout=0.5)
            s.settimeout(1.0)
            buf = b""
            while b"\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    raise OSError("closed before INFO")
                buf += d
            line, buf = buf.split(b"\r\n", 1)
            if not line.startswith(b"INFO ") or json.loads(line[5:]).get("ldm"):
                raise OSError("no INFO or lame duck")
            hello = b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"name":"%s"}\r\n' % mode.encode()
            if mode == "sub":
                hello += b"SUB %s 1\r\n" % subject.encode()
            s.sendall(hello + b"PING\r\n")
            s.setblocking(False)
            return s, ip, buf
        except OSError as e:
            st["failed_connects"] += 1
            event("connect %s failed: %s" % (ip, e))
    return None, None, b""


def write_status():
    st["since_last_rx"] = None if last_rx is None else time.monotonic() - last_rx
    st["t"] = time.monotonic() - start
    tmp = status_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f)
    os.replace(tmp, status_path)


sock, cur, buf = None, None, b""
avoid = None
seq = 0
next_pub = time.monotonic()
next_status = 0.0
while time.monotonic() - start < lifetime:
    now = time.monotonic()
    if now >= next_status:
        write_status()
        next_status = now + 0.1
    if sock is None:
        sock, cur, buf = connect(avoid)
        st["connected"], st["server"] = sock is not None, cur
        if sock is None:
            time.sleep(0.05)
            continue
        st["reconnects"] += 1
        event("connected to %s" % cur)
        avoid = None
    drop = None
    try:
        if mode == "pub" and now >= next_pub:
            seq += 1
            payload = str(seq).encode()
            sock.sendall(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
            st["sent"] = seq
            next_pub += PUB_EVERY
            if next_pub < now:
                next_pub = now + PUB_EVERY
        wait = max(0.0, min(next_status, next_pub if mode == "pub" else next_status) - time.monotonic())
        r, _, _ = select.select([sock], [], [], wait)
        if r:
            d = sock.recv(1 << 20)
            if not d:
                raise OSError("connection closed by server")
            buf += d
        while True:
            i = buf.find(b"\r\n")
            if i < 0:
                break
            line = buf[:i]
            op = line.split(b" ", 1)[0].upper()
            if op == b"MSG":
                size = int(line.split()[-1])
                if len(buf) < i + 2 + size + 2:
                    break
                payload = buf[i + 2:i + 2 + size]
                buf = buf[i + 2 + size + 2:]
                n = int(payload)
                t = time.monotonic()
                if last_rx is not None:
                    gap = t - last_rx
                    if gap > st["max_gap"]:
                        st["max_gap"], st["max_gap_at"] = gap, t - start
                    if gap > 0.1:
                        st["gaps"].append([round(t - start, 3), round(gap, 3), cur])
                        del st["gaps"][:-20]
                last_rx = t
                if n <= st["last_seq"]:
                    st["dups"] += 1
                    continue
                if st["last_seq"] and n > st["last_seq"] + 1:
                    st["missing"] += n - st["last_seq"] - 1
                st["last_seq"] = n
                st["count"] += 1
                continue
            buf = buf[i + 2:]
            if op == b"PING":
                sock.sendall(b"PONG\r\n")
            elif op == b"INFO":
                if json.loads(line[5:]).get("ldm"):
                    st["ldm_moves"] += 1
                    drop = "lame duck INFO"
                    avoid = cur
                    break
            elif op == b"-ERR":
                drop = line.decode(errors="replace")
                break
    except (OSError, ValueError) as e:
        drop = str(e) or type(e).__name__
    if drop is not None:
        event("leaving %s: %s" % (cur, drop))
        try:
            sock.close()
        except OSError:
            pass
        sock, cur, buf = None, None, b""
        st["connected"], st["server"] = False, None
write_status()
