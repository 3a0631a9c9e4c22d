"""A JetStream publisher that keeps going through a rolling restart, and a reader, for
tests/k8s_sim/js_rolling.rs; raw NATS protocol, run inside a client network namespace.

    js_pub.py pub STATUS_FILE STOP_FILE SERVICE SUBJECT LIFETIME_S
    js_pub.py read HOST STREAM COUNT

`pub` publishes msg-1, msg-2, ... one at a time, each with a reply subject and
`Nats-Msg-Id: roll-<i>`, and waits for its ack (1 s): without one (timeout, no responders, an
error, a lost connection) it sends the same message with the same id again, until acked; only
then the next. It connects to an address SERVICE resolves to (the client Service: the ready
pods), in turn; on a lame-duck INFO (`"ldm": true`) it moves to another one after the
message in flight, on a closed connection at once. Once STOP_FILE exists it stops before the
next message, so every message it sent is acked. STATUS_FILE (JSON) is rewritten every 200 ms
(counts, the longest stall: the time between two acks) and at the end with every ack
`[i, seq, duplicate]`; it exits after LIFETIME_S whatever happens, with `unacked` set.

`read` gets sequences 1..COUNT+1 with $JS.API.STREAM.MSG.GET (pipelined on one connection,
each retried until answered) and prints {"messages": [[seq, payload, msg id] or [seq, null,
error code]]}.
"""
import base64
import json
import os
import random
import socket
import sys
import time

PORT = 4222
ACK_WAIT = 1.0
PUB_EVERY = 0.004  # at most 250 messages/s
STALL_LOG = 0.25


class Closed(OSError):
    pass


class Conn:
    def __init__(self, ip, name):
        self.ip = ip
        self.s = socket.create_connection((ip, PORT), timeout=0.5)
        self.buf = b""
        self.ldm = False
        self.n = 0
        end = time.monotonic() + 2.0
        info = self.line(end)
        if not info.startswith(b"INFO "):
            raise Closed("no INFO: %r" % info[:80])
        if json.loads(info[5:]).get("ldm"):
            raise Closed("in lame duck mode")
        self.s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,'
                       b'"no_responders":true,"name":"%s"}\r\nSUB _INBOX.roll.* 1\r\nPING\r\n' % name)
        while True:
            op = self.handle(self.line(end))
            if op == b"PONG":
                return

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def fill(self, end):
        left = end - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        self.s.settimeout(left)
        d = self.s.recv(1 << 20)
        if not d:
            raise Closed("connection closed by server")
        self.buf += d

    def line(self, end):
        while b"\r\n" not in self.buf:
            self.fill(end)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def payload(self, n, end):
        while len(self.buf) < n + 2:
            self.fill(end)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def handle(self, line):
        """Protocol lines other than messages; the op."""
        op = line.split(b" ", 1)[0].upper()
        if op == b"PING":
            self.s.sendall(b"PONG\r\n")
        elif op == b"INFO":
            if json.loads(line[5:]).get("ldm"):
                self.ldm = True
        elif op == b"-ERR":
            raise Closed(line.decode(errors="replace"))
        return op

    def send(self, subject, payload, headers=None):
        self.n += 1
        inbox = b"_INBOX.roll.%d" % self.n
        if headers:
            hdr = b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % kv for kv in headers) + b"\r\n"
            self.s.sendall(b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
                subject, inbox, len(hdr), len(hdr) + len(payload), hdr, payload))
        else:
            self.s.sendall(b"PUB %s %s %d\r\n%s\r\n" % (subject, inbox, len(payload), payload))
        return inbox

    def next_reply(self, end):
        """(inbox, headers, payload) of the next message; socket.timeout at `end`."""
        while True:
            line = self.line(end)
            parts = line.split(b" ")
            if parts[0] == b"MSG":
                return parts[1], b"", self.payload(int(parts[-1]), end)
            if parts[0] == b"HMSG":
                hlen, tlen = int(parts[-2]), int(parts[-1])
                data = self.payload(tlen, end)
                return parts[1], data[:hlen], data[hlen:]
            self.handle(line)

    def request(self, subject, payload, headers, timeout):
        inbox = self.send(subject, payload, headers)
        end = time.monotonic() + timeout
        while True:
            try:
                got, hdr, data = self.next_reply(end)
            except socket.timeout:
                return None
            if got == inbox:
                return hdr, data


def resolve(name):
    try:
        return sorted({ai[4][0] for ai in socket.getaddrinfo(name, PORT, socket.AF_INET, socket.SOCK_STREAM)})
    except OSError:
        return []


def pub():
    status_path, stop_path, service, subject = sys.argv[2:6]
    subject = subject.encode()
    lifetime = float(sys.argv[6])
    start = time.monotonic()
    st = {
        "acked": 0, "connects": 0, "failed_connects": 0, "ldm_moves": 0, "closed": 0,
        "timeouts": 0, "no_responders": 0, "errors": {}, "retries": 0, "duplicates": 0,
        "max_stall": 0.0, "max_stall_at": None, "max_stall_server": None, "stalls": [],
        "events": [], "server": None, "unacked": None, "done": False, "acks": None,
        "streams": [],
    }
    acks = []
    next_status = 0.0

    def event(text):
        st["events"].append("%.3f %s" % (time.time(), text))
        del st["events"][:-60]

    def write_status(final=False):
        st["t"] = time.monotonic() - start
        st["since_last_ack"] = time.monotonic() - last_ack
        if final:
            st["acks"] = acks
        tmp = status_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, status_path)

    conn, avoid = None, None
    last_ack = time.monotonic()
    i = 0
    while not os.path.exists(stop_path):
        i += 1
        payload = b"msg-%d" % i
        hdrs = [(b"Nats-Msg-Id", b"roll-%d" % i)]
        tries = 0
        while True:
            now = time.monotonic()
            if now - start > lifetime:
                st["unacked"] = i
                event("lifetime over with msg-%d unacked" % i)
                write_status(final=True)
                sys.exit(1)
            if now >= next_status:
                write_status()
                next_status = now + 0.2
            if conn is None:
                ips = resolve(service)
                order = [ip for ip in ips if ip != avoid] + [ip for ip in ips if ip == avoid]
                if order:
                    k = random.randrange(len(order)) if avoid is None else 0
                    order = order[k:] + order[:k]
                for ip in order:
                    try:
                        conn = Conn(ip, b"js-pub")
                        st["connects"] += 1
                        st["server"] = ip
                        event("connected to %s (service: %s)" % (ip, ips))
                        avoid = None
                        break
                    except (OSError, ValueError) as e:
                        st["failed_connects"] += 1
                        event("connect %s: %s" % (ip, e))
                if conn is None:
                    time.sleep(0.05)
                    continue
            tries += 1
            if tries > 1:
                st["retries"] += 1
            try:
                r = conn.request(subject, payload, hdrs, ACK_WAIT)
            except (OSError, ValueError) as e:
                st["closed"] += 1
                event("msg-%d on %s: %s" % (i, conn.ip, e))
                conn.close()
                conn, st["server"] = None, None
                continue
            if r is None:
                st["timeouts"] += 1
                event("msg-%d on %s: no ack in %ss" % (i, conn.ip, ACK_WAIT))
            else:
                hdr, data = r
                if hdr.startswith(b"NATS/1.0 503"):
                    st["no_responders"] += 1
                    event("msg-%d on %s: no responders" % (i, conn.ip))
                    time.sleep(0.05)
                else:
                    v = json.loads(data)
                    if "seq" in v and "error" not in v:
                        t = time.monotonic()
                        gap = t - last_ack
                        if gap > st["max_stall"]:
                            st["max_stall"] = gap
                            st["max_stall_at"] = time.time() - gap
                            st["max_stall_server"] = conn.ip
                        if gap > STALL_LOG:
                            st["stalls"].append([round(time.time() - gap, 3), round(gap, 3), i, conn.ip])
                        last_ack = t
                        dup = bool(v.get("duplicate"))
                        st["duplicates"] += dup
                        if v.get("stream") not in st["streams"]:
                            st["streams"].append(v.get("stream"))
                        acks.append([i, v["seq"], dup])
                        st["acked"] = i
                        if conn.ldm:
                            st["ldm_moves"] += 1
                            event("leaving %s: lame duck" % conn.ip)
                            avoid = conn.ip
                            conn.close()
                            conn, st["server"] = None, None
                        break
                    code = str(v.get("error", {}).get("err_code", v.get("error")))
                    st["errors"][code] = st["errors"].get(code, 0) + 1
                    event("msg-%d on %s: %s" % (i, conn.ip, v.get("error")))
                    time.sleep(0.05)
            if conn is not None and conn.ldm:
                st["ldm_moves"] += 1
                event("leaving %s: lame duck, msg-%d not acked yet" % (conn.ip, i))
                avoid = conn.ip
                conn.close()
                conn, st["server"] = None, None
        pause = PUB_EVERY - (time.monotonic() - last_ack)
        if pause > 0:
            time.sleep(pause)
    st["done"] = True
    event("stopped after msg-%d" % i)
    write_status(final=True)


def read():
    host, stream, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
    end = time.monotonic() + 60
    subject = b"$JS.API.STREAM.MSG.GET." + stream.encode()
    out = {}
    want = list(range(1, count + 2))
    conn = None
    while want and time.monotonic() < end:
        try:
            if conn is None:
                conn = Conn(resolve(host)[0], b"js-read")
            pending = {}
            for seq in want[:200]:
                pending[conn.send(subject, json.dumps({"seq": seq}).encode())] = seq
            batch_end = time.monotonic() + 3
            while pending:
                try:
                    inbox, hdr, data = conn.next_reply(batch_end)
                except socket.timeout:
                    break
                seq = pending.pop(inbox, None)
                if seq is None or hdr.startswith(b"NATS/1.0 503"):
                    continue
                v = json.loads(data)
                m = v.get("message")
                if m is not None:
                    h = base64.b64decode(m.get("hdrs", "") or "")
                    mid = None
                    for l in h.split(b"\r\n"):
                        if l.lower().startswith(b"nats-msg-id:"):
                            mid = l.split(b":", 1)[1].strip().decode()
                    out[seq] = [m.get("seq"), base64.b64decode(m.get("data", "")).decode(), mid]
                elif v.get("error", {}).get("code") == 404:
                    out[seq] = [seq, None, v.get("error", {}).get("err_code")]
                # any other error (no leader for a moment): asked again
            want = [s for s in want if s not in out]
        except (OSError, ValueError, IndexError):
            conn = None
            time.sleep(0.1)
    print(json.dumps({"messages": [out.get(s) for s in range(1, count + 2)], "unanswered": want[:20]}))


if sys.argv[1] == "pub":
    pub()
elif sys.argv[1] == "read":
    read()
else:
    sys.exit("unknown command " + sys.argv[1])
