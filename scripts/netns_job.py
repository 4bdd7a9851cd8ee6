#!/usr/bin/env python3
"""A three-site job on three "hosts": how a real deployment goes, on one machine (issue 17).

Every site runs on a host of its own with its own address, and every host also runs one member of
the job's etcd cluster (losing a datacenter keeps a majority). Here a host is a Linux network
namespace: its own interfaces, addresses and ports, its processes unable to reach each other over
loopback. The hosts are joined by a switch (a bridge in a namespace of its own):

    mrd-<id>-a 10.77.0.1 --+
    mrd-<id>-b 10.77.0.2 --+-- br0 in mrd-<id>-sw
    mrd-<id>-c 10.77.0.3 --+

Once for the job, its operator makes its secrets (`meridian keys base.toml --out keys`): every
site's CURVE keypair, whose public halves the base file lists, and the job's own CA with a
certificate per site for etcd's mutual TLS; each host gets its own directory keys/<site> (here all
hosts share this machine's files; --plaintext leaves both out and says insecure = true). Then on
each host:
  1. etcd --name m<i> --listen-client-urls https://<its address>:2379 --client-cert-auth ... with
     the site's certificate, for clients and peers alike (one member per host); once, from any
     host, etcd's auth: the grants `meridian keys` printed (each site its own user and role: the
     job's keys to read, its own records to write), then `etcdctl auth enable`;
  2. meridian site --config <its file> --site <its name>, its file including the job's base file
     (configs/examples/three-continent is the same layout) and naming its own run directory.
No `meridian launch`: each site is started, and restarted, on its own host.

Faults, both optional and both survived as the loopback fault suite's are:
  --kill-site S: once S's site has logged step --kill-at, kill -9 of every process on S's host (its
                 site and its etcd member), both started again --restart-after seconds later; the
                 site resumes from its checkpoint.
  --cut-link S:  once S's site has logged step --cut-at (and a killed site has joined again, so the
                 faults never overlap), S's cable pulled out of the switch for --cut-for seconds.
The faults follow the job's steps, not the clock, so they land in the same place in the job however
busy the machine is (a site whose cable comes back only after the others finished has nobody left to
take the last versions from, and ends on its own weights).
Once the sites train, an intruder on the switch (a namespace of its own) tries host a's etcd
without a certificate and in plaintext: both must be refused, and a's member must log the refusal.
Passes when both faults asked for happened, the intruder got nothing, every site ends with exit 0
and all three hold the same weights (params_hash) and version. Writes <out>/netns.json.

Needs root and `ip netns` (exits 77 saying why otherwise). Everything it makes (namespaces, their
interfaces and addresses, the bridge) lives inside namespaces it creates and removes when it ends,
also on failure or Ctrl-C; no traffic leaves them; the job is bounded (--limit-s).
Usage: scripts/netns_job.py [--out runs/netns] [--steps 1000] [--kill-site b] [--cut-link c]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from netns_hosts import SKIP, Hosts, logged_step, prepare, report

ROOT = Path(__file__).resolve().parent.parent
ETCD = "/usr/bin/etcd"
SITES = ["a", "b", "c"]


def address(site):
    return f"10.77.0.{SITES.index(site) + 1}"


def start_etcd(hosts, site, out, state, tls):
    """Host `site`'s etcd member; with `tls`, mutual TLS for clients and peers with the site's
    certificate from `meridian keys` (keys/<site>/etcd.crt names the host's address)."""
    i = SITES.index(site)
    scheme = "https" if tls else "http"
    cluster = ",".join(f"m{SITES.index(s)}={scheme}://{address(s)}:2380" for s in SITES)
    log = open(out / f"etcd-{site}.log", "a")
    keys = out / "keys" / site
    secure = ["--cert-file", str(keys / "etcd.crt"), "--key-file", str(keys / "etcd.key"),
              "--trusted-ca-file", str(keys / "ca.crt"), "--client-cert-auth",
              "--peer-cert-file", str(keys / "etcd.crt"), "--peer-key-file", str(keys / "etcd.key"),
              "--peer-trusted-ca-file", str(keys / "ca.crt"), "--peer-client-cert-auth",
              # The passwords `meridian keys` makes are 32 random bytes: bcrypt's cheapest cost is
              # plenty, and its default (10) costs each authentication ~0.1 s of CPU.
              "--bcrypt-cost", "4"] if tls else []
    return hosts.start(site, [ETCD, "--name", f"m{i}", "--data-dir", str(out / f"etcd-{site}"),
                                 "--listen-client-urls", f"{scheme}://{address(site)}:2379",
                                 "--advertise-client-urls", f"{scheme}://{address(site)}:2379",
                                 "--listen-peer-urls", f"{scheme}://{address(site)}:2380",
                                 "--initial-advertise-peer-urls", f"{scheme}://{address(site)}:2380",
                                 "--initial-cluster", cluster, "--initial-cluster-state", state,
                                 "--heartbeat-interval", "100", "--election-timeout", "1000", "--logger", "zap", "--log-level", "warn",
                                 # A member cut off from the others keeps raising its term; back, it would
                                 # unseat the leader and cost the cluster an election: pre-vote asks first.
                                 "--pre-vote",
                                 *secure],
                   log)


# Run inside the intruder's namespace: a range request over all of etcd's keys, once over TLS with
# the job's CA trusted but no certificate shown, once in plaintext. Prints what came back of each:
# the status line, or why nothing did. Bounded: 5 s per attempt.
INTRUDER = r'''
import json, socket, ssl, sys
host, ca = sys.argv[1], sys.argv[2]
body = b'{"key":"AA==","range_end":"AA=="}'
request = (b"POST /v3/kv/range HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
def attempt(wrap):
    try:
        with socket.create_connection((host, 2379), timeout=5) as raw:
            conn = wrap(raw)
            conn.settimeout(5)
            conn.sendall(request)
            return conn.recv(200).split(b"\r\n")[0].decode(errors="replace") or "closed without an answer"
    except Exception as e:
        return f"refused: {type(e).__name__}: {e}"
context = ssl.create_default_context(cafile=ca)
context.check_hostname = False
print(json.dumps({"tls_without_certificate": attempt(lambda raw: context.wrap_socket(raw)),
                  "plaintext": attempt(lambda raw: raw)}))
'''


def intrude(hosts, out, target):
    """An intruder on the switch tries `target`'s etcd member; what each attempt got, and whether
    the member logged the refusal."""
    hosts.join("x", "10.77.0.99")
    done = subprocess.run(["ip", "netns", "exec", hosts.ns("x"), sys.executable, "-c", INTRUDER, address(target),
                           str(out / "keys" / target / "ca.crt")], capture_output=True, text=True, timeout=30)
    result = json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr.strip()}
    time.sleep(0.5)  # etcd writes its log line as it drops the connection
    result["refused"] = all(not str(v).startswith("HTTP/1.1 200") for v in result.values()) and "error" not in result
    result["logged"] = "rejected connection" in (out / f"etcd-{target}.log").read_text()
    return result


def grant(hosts, out):
    """etcd's auth, as the job's operator turns it on once from host a: the etcdctl commands
    `meridian keys` printed, as printed (a role per site: its job's keys to read, its own records and
    the keys all sites share to write; a user per site with its password), then root and auth on.
    From then on each site acts as its own user."""
    keys = out / "keys" / "a"
    env = dict(os.environ, ETCDCTL_ENDPOINTS=f"https://{address('a')}:2379", ETCDCTL_CACERT=str(keys / "ca.crt"),
               ETCDCTL_CERT=str(keys / "etcd.crt"), ETCDCTL_KEY=str(keys / "etcd.key"))
    printed = re.findall(r"^#   (etcdctl .*)$", (out / "keys" / "printed.txt").read_text(), re.M)
    if not any("grant-permission" in line for line in printed):
        raise RuntimeError("meridian keys printed no etcdctl grants")
    commands = printed + [f"etcdctl user add root --new-user-password={os.urandom(16).hex()}",
                          "etcdctl user grant-role root root", "etcdctl auth enable"]
    for command in commands:
        done = subprocess.run(["ip", "netns", "exec", hosts.ns("a"), "bash", "-c", command], env=env,
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command.split()[:3])}: {done.stderr.strip()}")


def make_keys(meridian, out):
    """The job's secrets, as its operator makes them once (`meridian keys`): each site's CURVE
    keypair (the secret half goes to its site's host only, the public halves into the job file) and
    its etcd certificate under the job's CA. Returns the public keys by site."""
    done = subprocess.run([str(meridian), "keys", str(out / "base.toml"), "--out", str(out / "keys")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"meridian keys: {done.stderr.strip()}")
    (out / "keys" / "printed.txt").write_text(done.stdout)  # the grants, which grant() runs
    return dict(re.findall(r'name = "(\w+)": link_public_key = "([^"]{40})"', done.stdout))


def write_job(out, steps, keys=None):
    """The job's base file, and one file per site that includes it (as each datacenter keeps its own).
    With `keys` the links speak CURVE (every site lists its public key, and each reads its own
    secret key from keys/<site>/link.key) and etcd mutual TLS; without, both are plaintext."""
    data = ROOT / "data/tinyshakespeare/input.txt"
    scheme = "https" if keys else "http"
    endpoints = ", ".join(f'"{scheme}://{address(s)}:2379"' for s in SITES)
    plaintext = "" if keys else """# etcd over plain HTTP between the hosts and links without CURVE: --plaintext.
insecure = true
"""
    # Each host shows its own certificate ("{site}": the site's name), as `meridian keys` laid them out.
    control_tls = ('ca_file = "keys/{site}/ca.crt"\ncert_file = "keys/{site}/etcd.crt"\n'
                   'key_file = "keys/{site}/etcd.key"\npassword_file = "keys/{site}/etcd.password"\n') if keys else ""

    base = f"""# The job: three sites, each on its own host; one etcd member per host.
[job]
name = "netns"
seed = 7
run_dir = "{out / 'run'}"
{plaintext}
[model]
preset = "tiny"

[data]
path = "{data}"
val_fraction = 0.1

[inner]
lr = 3e-3
batch_per_replica = 4
steps = {steps}

[outer]
algorithm = "diloco"
inner_steps = 40
codec = "int8"

[control]
endpoints = [{endpoints}]
lease_ttl_s = 5
keepalive_ms = 1000
{control_tls}
[log]
every = 20
eval_every = 0

[checkpoint]
every = 40
keep = 2
"""
    if keys:
        base += '\n[transport]\nlink_key_file = "keys/{site}/link.key"  # each host holds its own\n'
    for s in SITES:
        base += f'\n[[site]]\nname = "{s}"\nhost = "{address(s)}"  # where its link listens: its own address\nport = 7100\nreplicas = 1\n'
        if keys:
            base += f'link_public_key = "{keys[s]}"\n'
    (out / "base.toml").write_text(base)
    for s in SITES:
        (out / f"{s}.toml").write_text(f'# What host {s} runs: meridian site --config {s}.toml --site {s}\ninclude = "base.toml"\n')


def rejoined(out, site):
    """Whether the site, started again, has joined the job once more (its second sites_joined)."""
    try:
        text = (out / "run" / site / "events.jsonl").read_text()
    except OSError:
        return False
    return text.count('"event":"sites_joined"') >= 2


def site_step(out, site):
    """The newest step the site's metrics say it reached."""
    return logged_step(out / "run" / site / "metrics.jsonl")


def start_site(hosts, meridian, out, site):
    log = open(out / f"site-{site}.log", "a")
    # Three "hosts" share this machine's cores. Left to itself each site would run OpenBLAS on all
    # of them, and OpenMP threads spin while they wait: three sites doing so on 2 cores slowed their
    # steps 40-fold at times. On hosts of their own, sites take their host's cores.
    return hosts.start(site, ["env", "OMP_NUM_THREADS=1", str(meridian), "site", "--config",
                                 str(out / f"{site}.toml"), "--site", site], log)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "runs/netns")
    p.add_argument("--meridian", type=Path, default=ROOT / "build/release/sites/meridian")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--kill-site", choices=SITES)
    p.add_argument("--kill-at", type=int, default=100, help="the killed site's step")
    p.add_argument("--restart-after", type=float, default=2)
    p.add_argument("--cut-link", choices=SITES)
    p.add_argument("--cut-at", type=int, default=300, help="the cut site's step")
    p.add_argument("--cut-for", type=float, default=6)
    p.add_argument("--limit-s", type=float, default=600)
    p.add_argument("--plaintext", action="store_true", help="links without CURVE, etcd without TLS (the default speaks both)")
    args = p.parse_args()


    out = prepare("netns_job", args.out)
    if out is None:
        return SKIP
    write_job(out, args.steps)
    if not args.plaintext:
        write_job(out, args.steps, make_keys(args.meridian, out))
    hosts = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        hosts = Hosts(str(os.getpid()), {s: address(s) for s in SITES})
        etcd = {s: start_etcd(hosts, s, out, "new", not args.plaintext) for s in SITES}
        time.sleep(2)  # a leader elected before the sites look for one (they would retry anyway)
        if not args.plaintext:
            grant(hosts, out)
        sites = {s: start_site(hosts, args.meridian, out, s) for s in SITES}
        start, killed, cut, restarted, faults_s = time.monotonic(), False, None, [], {}
        intruder = None
        while any(proc.poll() is None for proc in sites.values()):
            now = time.monotonic() - start
            if now > args.limit_s:
                raise RuntimeError(f"the job did not end within {args.limit_s:.0f} s")
            if not args.plaintext and intruder is None and site_step(out, "a") >= 40:
                intruder = intrude(hosts, out, "a")
                print(f"{now:6.1f} s: an intruder tried host a's etcd: {json.dumps(intruder)}", flush=True)
            if args.kill_site and not killed and site_step(out, args.kill_site) >= args.kill_at:
                print(f"{now:6.1f} s: kill -9 of every process on host {args.kill_site}", flush=True)
                hosts.kill_all(args.kill_site)
                killed = True
                faults_s["kill"] = round(now, 1)
                time.sleep(args.restart_after)
                print(f"{time.monotonic() - start:6.1f} s: site {args.kill_site} and its etcd member started again",
                      flush=True)
                etcd[args.kill_site] = start_etcd(hosts, args.kill_site, out, "existing", not args.plaintext)
                sites[args.kill_site] = start_site(hosts, args.meridian, out, args.kill_site)
                restarted.append(args.kill_site)
            # One fault at a time: a cut while the killed host is still down would leave its etcd
            # member's cluster without a majority, a different fault from either.
            settled = not args.kill_site or (killed and rejoined(out, args.kill_site))
            if args.cut_link and cut is None and settled and site_step(out, args.cut_link) >= args.cut_at:
                print(f"{now:6.1f} s: host {args.cut_link}'s link cut for {args.cut_for:.0f} s", flush=True)
                hosts.plug(args.cut_link, False)
                cut = now
                faults_s["cut"] = round(now, 1)
            if cut is not None and cut >= 0 and now >= cut + args.cut_for:
                print(f"{now:6.1f} s: host {args.cut_link}'s link back", flush=True)
                hosts.plug(args.cut_link, True)
                cut = -1
                faults_s["cut_back"] = round(now, 1)
            time.sleep(0.2)
        codes = {s: proc.returncode for s, proc in sites.items()}
        summaries = {}
        for s in SITES:
            path = out / "run" / s / "summary.json"
            summaries[s] = json.loads(path.read_text()) if path.exists() else {}
        hashes = {s: summaries[s].get("params_hash") for s in SITES}
        versions = {s: summaries[s].get("version") for s in SITES}
        ok = all(c == 0 for c in codes.values()) and len(set(hashes.values())) == 1 and None not in hashes.values() \
            and len(set(versions.values())) == 1
        # A fault asked for that the job ended before is a test that tested nothing.
        faults_done = (not args.kill_site or killed) and (not args.cut_link or "cut_back" in faults_s)
        ok = ok and faults_done and (args.plaintext or (intruder is not None and intruder["refused"] and intruder["logged"]))
        result = {"ok": ok, "curve": not args.plaintext, "etcd_tls": not args.plaintext, "intruder": intruder,
                  "exit_codes": codes, "params_hash": hashes, "version": versions,
                  "steps": {s: summaries[s].get("steps") for s in SITES}, "wall_s": round(time.monotonic() - start, 1),
                  "killed": args.kill_site, "restarted": restarted, "cut": args.cut_link, "faults_s": faults_s,
                  "addresses": {s: address(s) for s in SITES}}
        return report(out / "netns.json", result)
    finally:
        if hosts is not None:
            hosts.close()


if __name__ == "__main__":
    sys.exit(main())
