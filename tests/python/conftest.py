"""Fixtures that run a fresh natsd (or, with NATSD_BIN, any nats-server-compatible binary).

The server is started with `-a 127.0.0.1 -p -1` (random free port) plus per-test flags; its
stderr goes to a temp file that is polled (with a deadline) for
`[INF] Listening for client connections on 127.0.0.1:<port>` and `[INF] Server is ready`.
The log is attached to the test report when a test fails.
"""
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO / "target" / "debug" / "natsd"
STARTUP_DEADLINE = 10.0  # seconds; a debug build starts in well under 1 s
LISTEN_RE = re.compile(r"\[INF\] Listening for client connections on 127\.0\.0\.1:(\d+)")
HTTP_RE = re.compile(r"\[INF\] Starting http monitor on 127\.0\.0\.1:(\d+)")


def natsd_bin() -> Path:
    return Path(os.environ.get("NATSD_BIN") or DEFAULT_BIN)


class Server:
    def __init__(self, args):
        self.args = list(args)
        self.proc = None
        self.port = None
        self.http_port = None  # set when started with -m
        self._log = tempfile.NamedTemporaryFile(prefix="natsd-", suffix=".log", delete=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def log(self) -> str:
        try:
            return Path(self._log.name).read_text(errors="replace")
        except OSError:
            return ""

    def start(self):
        binary = natsd_bin()
        if not binary.is_file() or not os.access(binary, os.X_OK):
            pytest.fail(
                f"server binary {binary} is missing or not executable: run `cargo build` "
                f"(or set NATSD_BIN to a nats-server-compatible binary)",
                pytrace=False,
            )
        cmd = [str(binary), "-a", "127.0.0.1", "-p", "-1", *self.args]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log
        )
        deadline = time.monotonic() + STARTUP_DEADLINE
        while time.monotonic() < deadline:
            text = self.log()
            m = LISTEN_RE.search(text)
            if m and "[INF] Server is ready" in text:
                self.port = int(m.group(1))
                h = HTTP_RE.search(text)
                if h:
                    self.http_port = int(h.group(1))
                return self
            if self.proc.poll() is not None:
                pytest.fail(
                    f"{' '.join(cmd)} exited with {self.proc.returncode} before it was ready:\n{text}",
                    pytrace=False,
                )
            time.sleep(0.01)
        self.stop()
        pytest.fail(
            f"{' '.join(cmd)} not ready within {STARTUP_DEADLINE}s:\n{self.log()}", pytrace=False
        )

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()

    def cleanup(self):
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


@pytest.fixture
def start_server(request):
    """Factory: start_server("--user", "u", "--pass", "p") -> running Server (stopped at teardown)."""
    servers = []
    request.node._natsd_servers = servers

    def _start(*args):
        s = Server(args).start()
        servers.append(s)
        return s

    yield _start
    for s in servers:
        s.stop()
        s.cleanup()


@pytest.fixture
def server(start_server):
    """A fresh natsd without auth, per test."""
    return start_server()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    # On failure, show each server's log (stderr) in the report.
    if rep.failed:
        for s in getattr(item, "_natsd_servers", []):
            rep.sections.append((f"server log {s.url} ({rep.when})", s.log()))
