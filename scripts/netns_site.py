#!/usr/bin/env python3
"""One site whose replicas run on two hosts, started by a cluster launcher: how a site spans the
machines of a datacenter, on one machine.

Each host is a network namespace of its own (scripts/netns_hosts.py), so its replicas cannot reach
each other over loopback:

    mrd-<id>-a 10.77.0.1: the site's agent (`meridian site --attach`, its store on 10.77.0.1:29500)
                          and replica 0
    mrd-<id>-b 10.77.0.2: replica 1

Each replica is `meridian replica --config F --site local`, as a launcher starts it: RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT in its environment. Its collectives listen on the address its traffic to
the store leaves from, so the group's mesh forms over the switch. The site shards AdamW's state
(ZeRO stage 1: reduce-scatter and all-gather between the hosts) and compares its replicas' weights
every few steps.

--cut-at N pulls host b's cable once the site logged step N, for --cut-for seconds (longer than the
heartbeat and collective timeouts): replica 0's collectives time out, the agent evicts replica 1 and
the site trains on alone. Back on the network, the same replica 1 process (its launcher never
restarted it) beats and announces itself again; the agent admits it, the group takes it back and it
heals from replica 0.

Passes when every process ends with exit 0 after all the steps, both replicas end on the same
weights (params_hash), each listened on its own host's address (its `joined` event), no replica was
found to differ, and no replica was evicted, or with the cut exactly the above happened. Writes
<out>/netns-site.json.

Needs root and `ip netns` (exits 77 saying why otherwise); everything it makes lives in namespaces it
removes when it ends, also on failure or Ctrl-C; the job is bounded (--limit-s).
Usage: scripts/netns_site.py [--out runs/netns-site] [--steps 200] [--cut-at 300 [--cut-for 8]]
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
HOSTS = {"a": "10.77.0.1", "b": "10.77.0.2"}
RANKS = {0: "a", 1: "b"}  # which host each replica runs on
STORE_PORT = 29500  # fixed, as a launcher fixes MASTER_PORT; each host has its own ports


def write_job(out, steps):
    data = ROOT / "data/tinyshakespeare/input.txt"
    (out / "job.toml").write_text(f"""# One site, its replicas on two hosts.
[job]
name = "netns-site"
seed = 5
run_dir = "{out / 'run'}"

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
count = {len(RANKS)}
heartbeat_timeout_ms = 5000
collective_timeout_ms = 5000
sdc_every = 20

[parallel]
zero_stage = 1
""")


def launcher_env(rank=None):
    """What a cluster launcher gives each process it starts."""
    env = dict(os.environ, WORLD_SIZE=str(len(RANKS)), MASTER_ADDR=HOSTS["a"], MASTER_PORT=str(STORE_PORT),
               # Two hosts share this machine's cores: one thread each, as on hosts of their own.
               OMP_NUM_THREADS="1")
    if rank is not None:
        env["RANK"] = str(rank)
    return env


def start_replica(hosts, meridian, out, rank, mode):
    return hosts.start(RANKS[rank], [str(meridian), "replica", "--config", str(out / "job.toml"), "--site", "local"],
                       open(out / f"replica{rank}.log", mode), launcher_env(rank))


def events(out):
    try:
        lines = (out / "run" / "events.jsonl").read_text().splitlines()
    except OSError:
        return []
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return parsed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "runs/netns-site")
    p.add_argument("--meridian", type=Path, default=ROOT / "build/release/sites/meridian")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--cut-at", type=int, help="host b's cable pulled once the site logged this step")
    p.add_argument("--cut-for", type=float, default=8, help="seconds, longer than the timeouts")
    p.add_argument("--limit-s", type=float, default=180)
    args = p.parse_args()

    out = prepare("netns_site", args.out)
    if out is None:
        return SKIP
    write_job(out, args.steps)
    job = str(out / "job.toml")
    hosts = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        hosts = Hosts(str(os.getpid()), HOSTS)
        start = time.monotonic()
        procs = {"agent": hosts.start("a", [str(args.meridian), "site", "--attach", "--config", job, "--site", "local"],
                                      open(out / "site.log", "w"), launcher_env())}
        for rank in RANKS:
            procs[f"replica{rank}"] = start_replica(hosts, args.meridian, out, rank, "w")
        cut = {}
        while any(proc.poll() is None for proc in procs.values()):
            now = time.monotonic() - start
            if now > args.limit_s:
                raise RuntimeError(f"the site did not end within {args.limit_s:.0f} s (logs under {out})")
            step = logged_step(out / "run" / "metrics.jsonl")
            if args.cut_at is not None and not cut and step >= args.cut_at:
                print(f"{now:6.1f} s: host b's cable pulled for {args.cut_for:.0f} s", flush=True)
                hosts.plug("b", False)
                cut = {"at_s": round(now, 1), "step": step}
            if "at_s" in cut and "back_s" not in cut and now >= cut["at_s"] + args.cut_for:
                print(f"{now:6.1f} s: host b's cable back", flush=True)
                hosts.plug("b", True)
                cut["back_s"] = round(now, 1)
            time.sleep(0.2)
        codes = {name: proc.returncode for name, proc in procs.items()}
        seen = events(out)
        done = {e["replica"]: e for e in seen if e.get("event") == "replica_done"}
        hashes = {rank: done.get(rank, {}).get("params_hash") for rank in RANKS}
        steps = {rank: done.get(rank, {}).get("step") for rank in RANKS}
        # Where each replica's collectives listened: its own host's address on the switch.
        listened = {e["replica"]: e.get("transport") for e in seen if e.get("event") == "joined"}
        expected = {rank: f"gloo {HOSTS[host]}" for rank, host in RANKS.items()}
        faults = [e["event"] for e in seen if e.get("event") in ("replica_misbehaved", "sdc_detected")]
        evicted = [e["id"] for e in seen if e.get("event") == "replica_evicted"]
        generations = [e["members"] for e in seen if e.get("event") == "generation"]
        # With the cable pulled: replica 1 evicted, the site on without it, then with it again, healed.
        rejoined = any(e.get("event") == "joined" and e["replica"] == 1 and e["healed"] for e in seen)
        survived = evicted == [1] and [0] in generations and generations[-1] == [0, 1] and rejoined
        ok = (all(c == 0 for c in codes.values()) and None not in hashes.values() and len(set(hashes.values())) == 1
              and all(s == args.steps for s in steps.values()) and not faults and listened == expected
              and (survived if cut else not evicted))
        result = {"ok": ok, "exit_codes": codes, "params_hash": hashes, "steps": steps, "faults": faults,
                  "cut": cut, "evicted": evicted, "generations": generations, "rejoined": rejoined,
                  "hosts": {rank: host for rank, host in RANKS.items()}, "listened": listened,
                  "wall_s": round(time.monotonic() - start, 1)}
        return report(out / "netns-site.json", result)
    finally:
        if hosts is not None:
            hosts.close()


if __name__ == "__main__":
    sys.exit(main())
