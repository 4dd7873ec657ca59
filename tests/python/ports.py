"""Free loopback ports for servers the tests and the benchmarks start.

A port is chosen for a server before the server binds it (a site's peers
are configured before it starts), so a port handed out once is never
handed out again in the same run. Ports come from below the kernel's
ephemeral range, where outgoing connections (a site's nodes dialing each
other) take their local ports.

As a script (bench/common.sh): `python3 ports.py FILE` prints one port and
appends it to FILE, the run's list of ports handed out.
"""

import os
import random
import socket
import sys


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_LOW = _ephemeral_low()


def _range():
    """The ports this process hands out: under pytest-xdist each worker
    (`PYTEST_XDIST_WORKER` gwN of `PYTEST_XDIST_WORKER_COUNT`) takes its own
    slice, so two workers never pick the same port."""
    low, high = 10000, max(_EPHEMERAL_LOW, 10001)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker.startswith("gw") and worker[2:].isdigit() and count > 1:
        i, width = int(worker[2:]) % count, (high - low) // count
        low, high = low + i * width, low + (i + 1) * width
    return low, high


_LOW, _HIGH = _range()


def free_port(handed_out):
    """A port that binds now and is not in `handed_out` (a set of ints),
    which it is added to."""
    while True:
        port = random.randrange(_LOW, _HIGH)
        if port in handed_out:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        handed_out.add(port)
        return port


if __name__ == "__main__":
    path = sys.argv[1]
    try:
        with open(path) as f:
            taken = {int(p) for p in f.read().split()}
    except OSError:
        taken = set()
    port = free_port(taken)
    with open(path, "a") as f:
        f.write(f"{port}\n")
    print(port)
