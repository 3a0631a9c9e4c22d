"""JetStream over the raw NATS protocol for tests/k8s_sim.rs, run inside a pod's network namespace.

    js.py create HOST STREAM SUBJECT REPLICAS   $JS.API.STREAM.CREATE (file storage)
    js.py pub HOST SUBJECT FIRST COUNT          publish FIRST..FIRST+COUNT-1, each with a reply
                                                subject and Nats-Msg-Id, retried until acked
    js.py get HOST STREAM COUNT                 $JS.API.STREAM.MSG.GET of sequences 1..COUNT
    js.py info HOST STREAM                      $JS.API.STREAM.INFO

HOST is a name or address (port 4222). Prints one JSON document on stdout; every request is
retried (a stream whose group is electing a leader answers nothing or 503 for a moment) until
its own deadline, then the script exits 1 with what it last saw.
"""
import base64
import json
import socket
import sys
import time

DEADLINE = 20.0


class Conn:
    def __init__(self, host):
        self.s = socket.create_connection((host, 4222), timeout=2)
        self.buf = b""
        self.line()  # INFO
        self.s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,'
                       b'"no_responders":true,"name":"js.py"}\r\nSUB _INBOX.jspy.* 1\r\nPING\r\n')
        while self.line() != b"PONG":
            pass
        self.n = 0

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise OSError("connection closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self, n):
        while len(self.buf) < n + 2:
            d = self.s.recv(65536)
            if not d:
                raise OSError("connection closed")
            self.buf += d
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def request(self, subject, payload, headers=None, timeout=2.0):
        """One request; (headers bytes, payload bytes) of the reply, or None on timeout."""
        self.n += 1
        inbox = "_INBOX.jspy.%d" % self.n
        if headers:
            hdr = b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % (k, v) for k, v in headers) + b"\r\n"
            self.s.sendall(b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
                subject.encode(), inbox.encode(), len(hdr), len(hdr) + len(payload), hdr, payload))
        else:
            self.s.sendall(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), inbox.encode(), len(payload), payload))
        end = time.monotonic() + timeout
        self.s.settimeout(0.2)
        while time.monotonic() < end:
            try:
                line = self.line()
            except socket.timeout:
                continue
            parts = line.split(b" ")
            if parts[0] == b"PING":
                self.s.sendall(b"PONG\r\n")
            elif parts[0] == b"MSG":
                data = self.read(int(parts[-1]))
                if parts[1].decode() == inbox:
                    return b"", data
            elif parts[0] == b"HMSG":
                hlen, tlen = int(parts[-2]), int(parts[-1])
                data = self.read(tlen)
                if parts[1].decode() == inbox:
                    return data[:hlen], data[hlen:]
        return None


def retry(host, what, f):
    """f(conn) -> (done, value); retried with a fresh connection on errors until DEADLINE."""
    end = time.monotonic() + DEADLINE
    last = None
    conn = None
    while time.monotonic() < end:
        try:
            if conn is None:
                conn = Conn(host)
            done, last = f(conn)
            if done:
                return last
        except OSError as e:
            last = "%s: %s" % (what, e)
            conn = None
        time.sleep(0.1)
    print(json.dumps({"error": "%s: no answer in %ss" % (what, DEADLINE), "last": str(last)}))
    sys.exit(1)


def api(host, subject, body):
    def f(c):
        r = c.request(subject, json.dumps(body).encode())
        if r is None:
            return False, "timeout"
        hdr, data = r
        if hdr.startswith(b"NATS/1.0 503"):
            return False, "no responders"
        v = json.loads(data)
        # A stream group without a leader yet: nats-server's 10008 "cluster not available"-like
        # errors and natsd's are retried; any other answer is the answer.
        if "error" in v and v["error"].get("code") == 503:
            return False, v
        return True, v
    return retry(host, subject, f)


def main():
    cmd, host = sys.argv[1], sys.argv[2]
    if cmd == "create":
        stream, subject, replicas = sys.argv[3], sys.argv[4], int(sys.argv[5])
        cfg = {"name": stream, "subjects": [subject], "num_replicas": replicas, "storage": "file"}
        print(json.dumps(api(host, "$JS.API.STREAM.CREATE." + stream, cfg)))
    elif cmd == "info":
        print(json.dumps(api(host, "$JS.API.STREAM.INFO." + sys.argv[3], {})))
    elif cmd == "pub":
        subject, first, count = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        acks = []
        for i in range(first, first + count):
            payload = b"msg-%d" % i

            def f(c, i=i, payload=payload):
                r = c.request(subject, payload, headers=[(b"Nats-Msg-Id", b"k8s-%d" % i)])
                if r is None or r[0].startswith(b"NATS/1.0 503"):
                    return False, "no ack"
                v = json.loads(r[1])
                return "seq" in v, v
            acks.append(retry(host, "publish %d" % i, f))
        print(json.dumps({"acks": acks}))
    elif cmd == "get":
        stream, count = sys.argv[3], int(sys.argv[4])
        msgs = []
        for seq in range(1, count + 1):
            v = api(host, "$JS.API.STREAM.MSG.GET." + stream, {"seq": seq})
            m = v.get("message")
            msgs.append(None if m is None else base64.b64decode(m.get("data", "")).decode())
        print(json.dumps({"messages": msgs}))
    else:
        sys.exit("unknown command " + cmd)


main()
