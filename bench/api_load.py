"""N concurrent API users against a running `foundry serve` (bounded in count and time).

    .venv/bin/python bench/api_load.py --url http://127.0.0.1:8765 --token TOKEN [--users 10] [--per-user 3]

Each user sends its questions one after another (in-corpus and out-of-corpus mixed);
prints throughput, P50/P95 latency, status codes and error bodies. Only 127.0.0.1.
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.error
import urllib.request

QUESTIONS = ["How many sensors can be connected to the RS-485 bus?", "Where is the firmware update page?",
             "Who won the football world cup final in 1954?", "What is the default sampling interval?",
             "What is the boiling point of ethanol?", "Which port does MQTT over TLS use?"]


def ask(url: str, token: str, question: str) -> tuple[int, float, str]:
    body = json.dumps({"question": question}).encode()
    req = urllib.request.Request(f"{url}/api/v1/query", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
            return resp.status, time.perf_counter() - start, ""
    except urllib.error.HTTPError as exc:
        return exc.code, time.perf_counter() - start, exc.read().decode()[:200]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--per-user", type=int, default=3)
    opts = p.parse_args()
    assert opts.url.startswith(("http://127.0.0.1", "http://localhost")), "loopback only"
    results: list[tuple[int, float, str]] = []
    lock = threading.Lock()

    def user(index: int) -> None:
        for i in range(opts.per_user):
            outcome = ask(opts.url, opts.token, QUESTIONS[(index + i) % len(QUESTIONS)] + f" (user {index})")
            with lock:
                results.append(outcome)

    start = time.perf_counter()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(opts.users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    lat = sorted(r[1] for r in results)
    codes: dict[int, int] = {}
    for code, _, _ in results:
        codes[code] = codes.get(code, 0) + 1
    print(json.dumps({"requests": len(results), "wall_s": round(wall, 1), "req_per_s": round(len(results) / wall, 2),
                      "p50_s": round(statistics.median(lat), 2), "p95_s": round(lat[int(0.95 * (len(lat) - 1))], 2),
                      "codes": codes, "errors": [r[2] for r in results if r[0] >= 500][:5]}, indent=2))


if __name__ == "__main__":
    main()
