"""Shared by the reliability scripts (fuzz, load, crash-loop): build the binary, run the real
service on a data directory of its own, talk to it, and read its figures (memory, open files,
/api/health). Python's standard library only."""

import http.client
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()


def build(release):
    """Builds `openvaala` (debug or release) and returns the binary's path."""
    command = ["cargo", "build", "--locked", "--quiet", "--bin", "openvaala"]
    if release:
        command.append("--release")
    subprocess.run(command, cwd=ROOT, check=True)
    return TARGET / ("release" if release else "debug") / "openvaala"


class Service:
    """`openvaala serve` on 127.0.0.1 (a free port) with its own data directory and config."""

    def __init__(self, binary, data_dir, config_text="", cwd=None, launcher=(), files_dir=None):
        """`launcher`: a command the service is started through (its arguments follow);
        `files_dir`: where the config and the log go (default: beside the data directory)."""
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        beside = Path(files_dir) / self.data_dir.name if files_dir else self.data_dir
        config = beside.with_suffix(".config.toml")
        config.write_text(config_text)
        self.log_path = beside.with_suffix(".log")
        # A restart on the same data directory appends to the log: only what it writes counts.
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = dict(os.environ, OPENVAALA_CONFIG=str(config), OPENVAALA_LOG="warn", NO_COLOR="1")
        env.pop("OPENVAALA_TOKEN", None)
        # Beside the data directory, not holding it: a conversation may not work in a directory
        # that holds the service's state, and conversations work where the service runs.
        if cwd is None:
            cwd = self.data_dir.parent / "work"
            cwd.mkdir(exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*map(str, launcher), str(binary), "serve", "--addr", "127.0.0.1:0",
                 "--data-dir", str(self.data_dir)],
                cwd=cwd, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.pid = self.process.pid
        self.url = self._wait_for_url()
        self.host, port = self.url.removeprefix("http://").split(":")
        self.port = int(port)
        # Every API request carries the service's local token (made before it served; an
        # older binary, which `make-fixture` runs, had none).
        token = self.data_dir / "local-token"
        self.token = token.read_text().strip() if token.exists() else None

    def log(self):
        """What this run of the service has logged so far."""
        with open(self.log_path, "rb") as log:
            log.seek(self.log_start)
            # Without the terminal colours tracing may add.
            return re.sub(r"\x1b\[[0-9;]*m", "", log.read().decode(errors="replace"))

    def _wait_for_url(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = re.findall(r"serving on (http://\S+)", self.log())
            if found:
                return found[-1]
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the service did not start:\n{self.log()}")

    def connect(self, timeout=30):
        return _Authorized(self.host, self.port, self.token, timeout=timeout)

    def health(self):
        return call(self.connect(), "GET", "/api/health")[1]

    def rss_kb(self):
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def open_files(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def stop(self):
        """Stops it as `openvaala serve stop` does (SIGTERM) and waits."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)

    def kill9(self):
        """Kills it as a crash would."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class _Authorized(http.client.HTTPConnection):
    """A connection whose requests carry the service's token, as any client's do."""

    def __init__(self, host, port, token, timeout):
        super().__init__(host, port, timeout=timeout)
        self.token = token

    def request(self, method, url, body=None, headers=None, **kwargs):
        headers = dict(headers or {})
        if self.token is not None:
            headers.setdefault("authorization", f"Bearer {self.token}")
        super().request(method, url, body=body, headers=headers, **kwargs)


def call(connection, method, path, body=None, headers=None):
    """One request on a kept-alive connection: (status, JSON body or None, response headers)."""
    data = json.dumps(body).encode() if body is not None else None
    sent = {"content-type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    raw = response.read()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return response.status, parsed, response.headers


def percentile(samples, fraction):
    """The nearest-rank percentile of samples (0 for none)."""
    if not samples:
        return 0
    ordered = sorted(samples)
    rank = min(len(ordered), max(1, int(-(-fraction * len(ordered) // 1))))
    return ordered[rank - 1]
