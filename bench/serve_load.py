#!/usr/bin/env python3
"""`vitreg serve` under a bounded loopback load: what docs/guide.md and the closing notes quote.

  /usr/bin/python3 bench/serve_load.py VITREG MODEL [IMAGES_DIR] [--clients 4] [--seconds 20] [--cache-mb 1024]

Starts `vitreg serve MODEL MODEL@softmax1 --images IMAGES_DIR --port 0`, then measures
  - the first request of each image (both configurations' forwards), one at a time;
  - row requests (a random patch of a cached image, every layer and head, as a click asks)
    from --clients concurrent clients for --seconds: requests/s and latency percentiles;
  - uploads from the same clients (each a forward; --max-forwards bounds them; 429s counted);
  - the server's peak resident memory (VmHWM).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import subprocess
import sys
import time


def request(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def hammer(clients, seconds, one):
    """Runs one(rng) from `clients` threads for `seconds`; returns (statuses, latencies)."""
    deadline = time.time() + seconds

    def worker(k):
        rng = random.Random(k)
        out = []
        while time.time() < deadline:
            t = time.perf_counter()
            status = one(rng)
            out.append((status, time.perf_counter() - t))
        return out

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = [r for part in pool.map(worker, range(clients)) for r in part]
    return [s for s, _ in results], sorted(t for _, t in results)


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))] if sorted_values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vitreg")
    ap.add_argument("model")
    ap.add_argument("images", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "assets", "images"))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--max-forwards", type=int, default=2)
    ap.add_argument("--cache-mb", type=float, default=1024)
    a = ap.parse_args()
    proc = subprocess.Popen([a.vitreg, "serve", a.model, a.model + "@softmax1", "--images", a.images, "--port", "0",
                             "--max-forwards", str(a.max_forwards), "--cache-mb", str(a.cache_mb)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1].strip().rstrip("/"))
        names = json.loads(request(port, "GET", "/api/images")[1])["images"]
        first = []
        for name in names:
            t = time.perf_counter()
            status, data = request(port, "GET", "/api/image?name=" + name)
            assert status == 200, data[:200]
            first.append(time.perf_counter() - t)
        entry = json.loads(request(port, "GET", "/api/image?name=" + names[0])[1])
        tokens = entry["configs"][0]["tokens"]

        def rows(rng):
            name = rng.choice(names)
            return request(port, "GET", f"/api/rows?image={name}&config={rng.randrange(2)}&query={rng.randrange(tokens)}")[0]

        statuses, lat = hammer(a.clients, a.seconds, rows)
        ok = statuses.count(200)
        print(f"images {len(names)}, tokens {tokens}; first request per image (2 forwards): "
              f"median {sorted(first)[len(first) // 2] * 1e3:.0f} ms")
        print(f"rows ({a.clients} clients, {a.seconds:.0f} s): {ok / a.seconds:.1f} requests/s, "
              f"p50 {percentile(lat, 50) * 1e3:.1f} ms, p99 {percentile(lat, 99) * 1e3:.1f} ms, non-200: {len(statuses) - ok}")
        with open(os.path.join(a.images, names[0]), "rb") as f:
            body = f.read()

        def upload(rng):
            return request(port, "POST", "/api/upload", body=body, headers={"X-Filename": names[0]})[0]

        statuses, lat = hammer(a.clients, a.seconds, upload)
        print(f"uploads ({a.clients} clients, --max-forwards {a.max_forwards}): {statuses.count(200) / a.seconds:.2f} accepted/s, "
              f"{statuses.count(429)} refused with 429, other: {len([s for s in statuses if s not in (200, 429)])}")
        print(f"server peak memory (VmHWM): {peak_rss_mb(proc.pid):.0f} MB with --cache-mb {a.cache_mb:g}; "
              f"still up: {proc.poll() is None}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
