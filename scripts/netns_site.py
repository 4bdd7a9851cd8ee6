#!/usr/bin/env python3
"""One site whose replicas run on two hosts, started by a cluster launcher: how a site spans the
machines of a datacenter, on one machine.

Each host is a network namespace of its own (scripts/netns_hosts.py), so its processes cannot reach
the others' over loopback:

    mrd-<id>-a 10.77.0.1: site a's agent (`meridian site --attach`, its store on 10.77.0.1:29500)
                          and replica 0
    mrd-<id>-b 10.77.0.2: site a's replica 1
    mrd-<id>-p 10.77.0.3: with --peer-site, the job's etcd and a second site, p, of one replica

Each replica of site a is `meridian replica --config F --site a`, as a launcher starts it: RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment. Its collectives listen on the address its
traffic to the store leaves from, so the group's mesh forms over the switch. The site shards AdamW's
state (ZeRO stage 1: reduce-scatter and all-gather between the hosts) and compares its replicas'
weights every few steps. With --peer-site the job is DiLoCo across sites a and p; site a's link is
on `host = 10.77.0.1` while replica 0 leads it.

Faults, both optional, each once site a logged the step given:
  --cut-at N:  host b's cable pulled for --cut-for seconds (longer than the heartbeat and collective
               timeouts): replica 0's collectives time out, the agent evicts replica 1 and the site
               trains on alone. Replica 1, its store silent, keeps asking (past the store's 10 s
               answer bound when the cut is longer than 15 s). Back on the network, the same
               replica 1 process (its launcher never restarted it) beats and announces itself again; the agent admits it, the group takes
               it back and it heals from replica 0.
  --kill-at N: kill -9 of replica 0, once a cut replica 1 is back in the group. Replica 1 leads:
               from its own host, with its link on 10.77.0.2, which the peer site reads from the
               control plane. Once a version came in over it, the launcher starts replica 0 again,
               which joins, heals and leads again.

Passes when every process ends with exit 0 after all the steps, the replicas (and with --peer-site
both sites) end on the same weights (params_hash), each of site a's replicas listened on its own
host's address (its `joined` events), no replica was found to differ, and every fault asked for
happened as above (with no fault, no eviction). Writes <out>/netns-site.json.

Needs root and `ip netns` (exits 77 saying why otherwise); everything it makes lives in namespaces it
removes when it ends, also on failure or Ctrl-C; the job is bounded (--limit-s).
Usage: scripts/netns_site.py [--out runs/netns-site] [--steps 200] [--cut-at 300 [--cut-for 8]]
                             [--peer-site [--kill-at 1500]]
"""
import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from netns_hosts import SKIP, Hosts, logged_step, prepare, report

ROOT = Path(__file__).resolve().parent.parent
ETCD = "/usr/bin/etcd"
HOSTS = {"a": "10.77.0.1", "b": "10.77.0.2", "p": "10.77.0.3"}
RANKS = {0: "a", 1: "b"}  # which host each replica of site a runs on
STORE_PORT = 29500  # fixed, as a launcher fixes MASTER_PORT; each host has its own ports


def write_job(out, steps, peer_site):
    data = ROOT / "data/tinyshakespeare/input.txt"
    job = f"""# Site a's replicas on two hosts{", site p on a third" if peer_site else ""}.
[job]
name = "netns-site"
seed = 5
run_dir = "{out / 'run'}"
{"insecure = true  # links and etcd in plaintext between the namespaces" if peer_site else ""}

[model]
preset = "tiny"

[data]
path = "{data}"

[inner]
lr = 3e-3
batch_per_replica = 4
steps = {steps}

[log]
every = 10
eval_every = 0

[replicas]
heartbeat_timeout_ms = 5000
collective_timeout_ms = 5000
sdc_every = 20

[parallel]
zero_stage = 1
"""
    if peer_site:
        job += f"""
[outer]
algorithm = "diloco"
inner_steps = 40
codec = "int8"

[control]
endpoints = ["http://{HOSTS['p']}:2379"]
lease_ttl_s = 5
keepalive_ms = 1000
"""
    for name, replicas in (("a", len(RANKS)), ("p", 1)) if peer_site else (("a", len(RANKS)),):
        job += f'\n[[site]]\nname = "{name}"\nhost = "{HOSTS[name]}"\nport = 7100\nreplicas = {replicas}\n'
    (out / "job.toml").write_text(job)


def launcher_env(rank=None):
    """What a cluster launcher gives each process it starts."""
    env = dict(os.environ, WORLD_SIZE=str(len(RANKS)), MASTER_ADDR=HOSTS["a"], MASTER_PORT=str(STORE_PORT),
               # The hosts share this machine's cores: one thread each, as on hosts of their own.
               OMP_NUM_THREADS="1")
    if rank is not None:
        env["RANK"] = str(rank)
    return env


def start_replica(hosts, meridian, out, rank, mode):
    return hosts.start(RANKS[rank], [str(meridian), "replica", "--config", str(out / "job.toml"), "--site", "a"],
                       open(out / f"replica{rank}.log", mode), launcher_env(rank))


def start_peer(hosts, meridian, out):
    """Host p: the job's etcd (one member, plaintext) and site p, which starts its own replica."""
    address = HOSTS["p"]
    etcd = hosts.start("p", [ETCD, "--name", "m0", "--data-dir", str(out / "etcd"),
                             "--listen-client-urls", f"http://{address}:2379",
                             "--advertise-client-urls", f"http://{address}:2379",
                             "--listen-peer-urls", f"http://{address}:2380",
                             "--initial-advertise-peer-urls", f"http://{address}:2380",
                             "--initial-cluster", f"m0=http://{address}:2380", "--log-level", "warn"],
                       open(out / "etcd.log", "w"))
    site = hosts.start("p", ["env", "OMP_NUM_THREADS=1", str(meridian), "site", "--config", str(out / "job.toml"),
                             "--site", "p"], open(out / "site-p.log", "w"))
    return etcd, site


def events(path):
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return parsed


def applied_with_link_on_b(seen):
    """Versions site a applied while its link was on host b: the peer site found it there."""
    link, applied = None, 0
    for e in seen:
        link = e["address"] if e.get("event") == "link_open" else link
        applied += e.get("event") == "commit_applied" and link is not None and HOSTS["b"] in link
    return applied


def healed_replicas(seen):
    """Site a's replicas that joined a group whose state replaced theirs: each came back after a fault."""
    return {e["replica"] for e in seen if e.get("event") == "joined" and e["healed"]}


def judge(seen, cut, killed):
    """What site a's events show of the faults: whether each one asked for went as it should."""
    evicted = [e["id"] for e in seen if e.get("event") == "replica_evicted"]
    generations = [e["members"] for e in seen if e.get("event") == "generation"]
    healed = healed_replicas(seen)
    links = [e["address"] for e in seen if e.get("event") == "link_open"]
    applied_from_b = applied_with_link_on_b(seen)
    # A replica back in the group after each fault, and the group whole at the end.
    ok = generations[-1:] == [[0, 1]] and len(evicted) == bool(cut) + bool(killed)
    if cut:
        ok = ok and 1 in evicted and [0] in generations and 1 in healed
    if killed:
        # Replica 1 led from its own host while replica 0 was away.
        ok = ok and 0 in evicted and [1] in generations and 0 in healed and applied_from_b > 0
    return ok, {"evicted": evicted, "generations": generations, "healed": sorted(healed), "links_opened": links,
                "applied_with_link_on_b": applied_from_b}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "runs/netns-site")
    p.add_argument("--meridian", type=Path, default=ROOT / "build/release/sites/meridian")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--peer-site", action="store_true", help="a second site, p, on a third host, and etcd")
    p.add_argument("--cut-at", type=int, help="host b's cable pulled once site a logged this step")
    p.add_argument("--cut-for", type=float, default=8, help="seconds, longer than the timeouts")
    p.add_argument("--kill-at", type=int, help="kill -9 of replica 0 once site a logged this step")
    p.add_argument("--limit-s", type=float, default=180)
    args = p.parse_args()
    out = prepare("netns_site", args.out)
    if out is None:
        return SKIP
    write_job(out, args.steps, args.peer_site)
    site_dir = out / "run" / "a" if args.peer_site else out / "run"
    job = str(out / "job.toml")
    hosts = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        hosts = Hosts(str(os.getpid()), HOSTS if args.peer_site else {h: HOSTS[h] for h in ("a", "b")})
        start = time.monotonic()
        procs = {}
        if args.peer_site:
            etcd, procs["site_p"] = start_peer(hosts, args.meridian, out)
        procs["site_a"] = hosts.start("a", [str(args.meridian), "site", "--attach", "--config", job, "--site", "a"],
                                      open(out / "site-a.log", "w"), launcher_env())
        for rank in RANKS:
            procs[f"replica{rank}"] = start_replica(hosts, args.meridian, out, rank, "w")
        cut, killed = {}, {}
        while any(proc.poll() is None for proc in procs.values()):
            now = time.monotonic() - start
            if now > args.limit_s:
                raise RuntimeError(f"the job did not end within {args.limit_s:.0f} s (logs under {out})")
            step = logged_step(site_dir / "metrics.jsonl")
            if args.cut_at is not None and not cut and step >= args.cut_at:
                print(f"{now:6.1f} s: host b's cable pulled for {args.cut_for:.0f} s", flush=True)
                hosts.plug("b", False)
                cut = {"at_s": round(now, 1), "step": step}
            if "at_s" in cut and "back_s" not in cut and now >= cut["at_s"] + args.cut_for:
                print(f"{now:6.1f} s: host b's cable back", flush=True)
                hosts.plug("b", True)
                cut["back_s"] = round(now, 1)
            # One fault at a time: the kill waits for the cut replica to be back in the group, or
            # on a fast machine it could land while that replica is still catching up.
            pending = args.kill_at is not None and not killed and step >= args.kill_at
            if pending and (args.cut_at is None or ("back_s" in cut
                                                    and 1 in healed_replicas(events(site_dir / "events.jsonl")))):
                print(f"{now:6.1f} s: kill -9 of replica 0", flush=True)
                procs["replica0"].kill()
                procs["replica0"].wait()
                killed = {"at_s": round(now, 1), "step": step}
            # The launcher starts it again once a version came in over the link on host b (at most 60 s).
            if killed and "restarted_s" not in killed and (
                    applied_with_link_on_b(events(site_dir / "events.jsonl")) > 0 or now > killed["at_s"] + 60):
                print(f"{now:6.1f} s: replica 0 started again", flush=True)
                procs["replica0"] = start_replica(hosts, args.meridian, out, 0, "a")
                killed["restarted_s"] = round(now, 1)
            time.sleep(0.2)
        codes = {name: proc.returncode for name, proc in procs.items()}
        if args.peer_site:
            etcd.kill()
        seen = events(site_dir / "events.jsonl")
        done = {e["replica"]: e for e in seen if e.get("event") == "replica_done"}
        hashes = {f"a{rank}": done.get(rank, {}).get("params_hash") for rank in RANKS}
        steps = {f"a{rank}": done.get(rank, {}).get("step") for rank in RANKS}
        versions = {}
        if args.peer_site:
            peer = {e["replica"]: e for e in events(out / "run" / "p" / "events.jsonl") if e.get("event") == "replica_done"}
            hashes["p0"] = peer.get(0, {}).get("params_hash")
            steps["p0"] = peer.get(0, {}).get("step")
            for name in ("a", "p"):
                summary = out / "run" / name / "summary.json"
                versions[name] = json.loads(summary.read_text()).get("version") if summary.exists() else None
        # Where each of site a's replicas' collectives listened: its own host's address on the switch.
        listened = {e["replica"]: e.get("transport") for e in seen if e.get("event") == "joined"}
        expected = {rank: f"gloo {HOSTS[host]}" for rank, host in RANKS.items()}
        faults = [e["event"] for e in seen if e.get("event") in ("replica_misbehaved", "sdc_detected")]
        faults_ok, story = judge(seen, cut, killed)
        ok = (all(c == 0 for c in codes.values()) and None not in hashes.values() and len(set(hashes.values())) == 1
              and all(s == args.steps for s in steps.values()) and not faults and listened == expected
              and None not in versions.values() and len(set(versions.values())) <= 1
              and faults_ok and (args.cut_at is None or "back_s" in cut) and (args.kill_at is None or bool(killed)))
        return report(out / "netns-site.json",
                      {"ok": ok, "exit_codes": codes, "params_hash": hashes, "steps": steps, "versions": versions,
                       "faults": faults,
                       "cut": cut, "killed": killed, **story, "listened": listened,
                       "hosts": {f"a{rank}": host for rank, host in RANKS.items()},
                       "wall_s": round(time.monotonic() - start, 1)})
    finally:
        if hosts is not None:
            hosts.close()


if __name__ == "__main__":
    sys.exit(main())
