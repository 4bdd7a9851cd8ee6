"""Hosts on one machine, for the smoke tests of a real deployment (netns_job.py, netns_site.py).

A host is a Linux network namespace: its own interfaces, addresses and ports, its processes unable
to reach each other over loopback. The hosts are joined by a switch (a bridge in a namespace of its
own), each by a veth cable that can be pulled out:

    mrd-<tag>-<name> <address> --+-- br0 in mrd-<tag>-sw

Everything made lives inside namespaces made here and removed by close(), whatever happened; no
traffic leaves them. Needs root and `ip netns`: skip_reason() says why not, where they cannot be made.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77  # what ctest takes as "skipped" (SKIP_RETURN_CODE)


def skip_reason():
    """None where namespaces can be made here, otherwise why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = subprocess.run(["ip", "netns", "add", f"mrd-probe-{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"network namespaces are not permitted here ({probe.stderr.strip()})"
    subprocess.run(["ip", "netns", "del", f"mrd-probe-{os.getpid()}"], capture_output=True)
    return None


def prepare(script, out):
    """`out`, made empty for a run of `script`; None, having said why, where hosts cannot be made here."""
    if (why := skip_reason()) is not None:
        print(f"{script}: skipped: {why}", file=sys.stderr)
        return None
    out = out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


class Hosts:
    """The namespaces, the switch and the veth cables; removed by close(), whatever happened."""

    def __init__(self, tag, addresses):
        """`addresses`: each host's name and its address on the switch (a /24)."""
        self.tag, self.made = tag, []
        self.switch = f"mrd-{tag}-sw"
        self.add(self.switch)
        self.ip(self.switch, "link", "add", "br0", "type", "bridge")
        self.ip(self.switch, "link", "set", "br0", "up")
        for name, addr in addresses.items():
            self.join(name, addr)

    def join(self, name, addr):
        """A host on the switch: `name` at `addr`."""
        ns = self.ns(name)
        self.add(ns)
        # Both ends made straight into their namespaces: nothing appears on this machine's own.
        run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", self.cable(name),
             "netns", self.switch])
        self.ip(ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        self.ip(ns, "link", "set", "eth0", "up")
        self.ip(ns, "link", "set", "lo", "up")
        self.ip(self.switch, "link", "set", self.cable(name), "master", "br0")
        self.ip(self.switch, "link", "set", self.cable(name), "up")

    def ns(self, name):
        return f"mrd-{self.tag}-{name}"

    def cable(self, name):
        return f"to-{name}"

    def add(self, ns):
        run(["ip", "netns", "add", ns])
        self.made.append(ns)

    def ip(self, ns, *args):
        run(["ip", "-n", ns, *args])

    def plug(self, name, on):
        self.ip(self.switch, "link", "set", self.cable(name), "up" if on else "down")

    def kill_all(self, name):
        """kill -9 of every process on the host."""
        kill_namespace(self.ns(name))

    def start(self, name, argv, log, env=None):
        """`argv` on host `name`, its output to `log`, in a session of its own."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns(name), *argv], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)

    def close(self):
        for ns in self.made:
            kill_namespace(ns)
        time.sleep(0.2)
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []


def kill_namespace(ns):
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


def logged_step(metrics):
    """The newest step a run's metrics.jsonl says it reached (0 before its first line)."""
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line).get("step", 0))
        except ValueError:
            continue  # a line being written
    return 0


def report(path, result):
    """Writes and prints the smoke test's result; its exit code."""
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1
