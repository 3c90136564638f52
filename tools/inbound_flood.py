"""What a flood of junk costs `tidings inbound` (issue 35 item 4), measured on loopback.

Starts `python -m tidings inbound` on a fresh SQLite database, then, from one client address:
opens N idle connections (how many get 220, how many 421; the server's RSS and CPU time before
and while they are held), sends one message with R RCPT (how many 250, how many 452, how
long), and sends one endless line (the server's RSS after it). Run from the project root:

    .venv/bin/python tools/inbound_flood.py [--connections 1500] [--recipients 2000]

Set PYTHONPATH to another checkout's `src` to measure that code instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import smtplib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOUNCES = "bounces@mail.example.org"
TICKS = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def idle_flood(port: int, count: int, pid: int) -> None:
    writers = []
    greetings: dict[str, int] = {}
    for _ in range(count):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            greetings[f"connect failed: {exc.strerror}"] = greetings.get("connect failed", 0) + 1
            continue
        writers.append(writer)
        line = await asyncio.wait_for(reader.readline(), timeout=30)
        code = line[:3].decode() or "closed"
        greetings[code] = greetings.get(code, 0) + 1
    await asyncio.sleep(1)  # measurement only: let the server settle before reading /proc
    print(f"  {count} connections opened: replies {greetings}")
    print(f"  server while they are held: RSS {rss_mb(pid):.1f} MB, CPU {cpu_seconds(pid):.2f} s")
    for writer in writers:
        writer.close()


def many_recipients(port: int, count: int) -> None:
    started = time.monotonic()
    codes: dict[int, int] = {}
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as client:
        client.ehlo("relay.example.net")
        client.mail("")
        for number in range(count):
            code, _ = client.rcpt(f"bounces+{number}-x@mail.example.org")
            codes[code] = codes.get(code, 0) + 1
        data_code, _ = client.data(b"Subject: out of office\r\n\r\nI am away.\r\n")
    took = time.monotonic() - started
    print(f"  one message, {count} RCPT: replies {codes}, DATA {data_code}, {took:.2f} s")


def endless_line(port: int, megabytes: int, pid: int) -> str:
    """Send one line of `megabytes` without an end; the server's RSS while the line is open."""
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as client:
        client.ehlo("relay.example.net")
        client.mail("")
        client.rcpt(BOUNCES)
        client.putcmd("DATA")
        client.getreply()
        try:
            for _ in range(megabytes):
                client.send(b"z" * 1_048_576)
        except (OSError, smtplib.SMTPServerDisconnected) as exc:
            return f"cut off ({type(exc).__name__}); server RSS {rss_mb(pid):.1f} MB"
        time.sleep(1)  # measurement only: let the server read what is in flight
        return f"all sent; server RSS {rss_mb(pid):.1f} MB with the line still open"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=1500)
    parser.add_argument("--recipients", type=int, default=2000)
    parser.add_argument("--line-megabytes", type=int, default=50)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        env |= {
            "TIDINGS_DATABASE_URL": f"sqlite:///{directory}/flood.db",
            "TIDINGS_INBOUND_BOUNCE_ADDRESS": BOUNCES,
        }
        subprocess.run([sys.executable, "-m", "tidings", "migrate"], env=env, check=True)
        port = free_port()
        server = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [sys.executable, "-m", "tidings", "inbound", "--port", str(port)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(600):
                try:
                    smtplib.SMTP("127.0.0.1", port, timeout=5).quit()
                    break
                except OSError:
                    time.sleep(0.1)
            pid = server.pid
            print(f"tidings inbound (pid {pid}) on 127.0.0.1:{port}")
            print(f"  server at rest: RSS {rss_mb(pid):.1f} MB, CPU {cpu_seconds(pid):.2f} s")
            asyncio.run(idle_flood(port, options.connections, pid))
            many_recipients(port, options.recipients)
            print(f"  server after: RSS {rss_mb(pid):.1f} MB, CPU {cpu_seconds(pid):.2f} s")
            outcome = endless_line(port, options.line_megabytes, pid)
            print(f"  one endless {options.line_megabytes} MB line: {outcome}")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
