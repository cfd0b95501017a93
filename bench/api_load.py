"""N concurrent API users against a running `foundry serve`, bounded in time (or in requests per user).

    .venv/bin/python bench/api_load.py --url http://127.0.0.1:8765 --token TOKEN [--users 10] [--duration 25]
    .venv/bin/python bench/api_load.py --url … --tokens-file tokens.txt --users 50 --duration 25

Each user sends questions one after another until the time is up, cycling through a mix:
*answerable* (in-corpus, made unique per user and turn, so the model runs), *refused*
(out-of-corpus, also unique: the retrieval gate refuses without a model call) and
*repeated* (one fixed question: answered from the answer cache after its first time).
With ``--tokens-file`` (one token per line) each user has its own account, as real users
would; with ``--token`` they share one. Prints throughput, P50/P95 per kind, status codes
and error bodies. Loopback only. ``tests/reliability/test_load.py`` uses ``run_load``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

ANSWERABLE = [
    "How many sensors can be connected to the RS-485 bus?",
    "Where is the firmware update page?",
    "What is the default sampling interval?",
    "Which port does MQTT over TLS use?",
]
REFUSED = ["Who won the football world cup final in 1954?", "What is the boiling point of ethanol?"]
REPEATED = "How many sensors can be connected to the RS-485 bus?"
KINDS = ("answerable", "refused", "repeated")


@dataclass(frozen=True)
class Outcome:
    kind: str
    status: int  # HTTP status; 0 when the connection itself failed
    seconds: float
    query_id: int | None = None
    answer_class: str = ""
    cached: bool = False
    error: str = ""


@dataclass
class LoadResult:
    users: int
    wall_s: float
    outcomes: list[Outcome] = field(default_factory=list)

    def latencies(self, kind: str | None = None) -> list[float]:
        return sorted(o.seconds for o in self.outcomes if kind is None or o.kind == kind)

    def summary(self) -> dict[str, Any]:
        codes: dict[int, int] = {}
        for o in self.outcomes:
            codes[o.status] = codes.get(o.status, 0) + 1
        per_kind = {kind: _percentiles(self.latencies(kind)) for kind in KINDS if self.latencies(kind)}
        classes: dict[str, int] = {}
        for o in self.outcomes:
            if o.status == 200:
                key = o.answer_class + (" (cached)" if o.cached else "")
                classes[key] = classes.get(key, 0) + 1
        return {
            "users": self.users,
            "requests": len(self.outcomes),
            "wall_s": round(self.wall_s, 1),
            "req_per_s": round(len(self.outcomes) / self.wall_s, 2) if self.wall_s else 0.0,
            **_percentiles(self.latencies()),
            "per_kind": per_kind,
            "codes": codes,
            "answers": classes,
            "errors": [o.error for o in self.outcomes if o.status >= 500 or o.status == 0][:5],
        }


def _percentiles(lat: list[float]) -> dict[str, float]:
    if not lat:
        return {"p50_s": 0.0, "p95_s": 0.0, "max_s": 0.0}
    return {
        "p50_s": round(statistics.median(lat), 2),
        "p95_s": round(lat[int(0.95 * (len(lat) - 1))], 2),
        "max_s": round(lat[-1], 2),
    }


def question_for(user: int, turn: int) -> tuple[str, str]:
    """The (kind, question) a user sends on its turn-th request."""
    kind = KINDS[(user + turn) % len(KINDS)]
    if kind == "answerable":
        return kind, f"{ANSWERABLE[(user + turn) % len(ANSWERABLE)]} (user {user}, turn {turn})"
    if kind == "refused":
        return kind, f"{REFUSED[(user + turn) % len(REFUSED)]} (user {user}, turn {turn})"
    return kind, REPEATED


def ask(url: str, token: str, kind: str, question: str, *, timeout: float) -> Outcome:
    body = json.dumps({"question": question}).encode()
    req = urllib.request.Request(
        f"{url}/api/v1/query",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data = json.loads(resp.read())
            return Outcome(
                kind,
                resp.status,
                time.perf_counter() - start,
                data.get("query_id"),
                data.get("answer_class", ""),
                bool(data.get("cached")),
            )
    except urllib.error.HTTPError as exc:
        return Outcome(kind, exc.code, time.perf_counter() - start, error=exc.read().decode()[:300])
    except OSError as exc:  # refused, reset, timed out: the server did not answer at all
        return Outcome(kind, 0, time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")


def run_load(
    url: str,
    tokens: list[str],
    *,
    users: int,
    duration: float | None = None,
    per_user: int | None = None,
    timeout: float = 600.0,
) -> LoadResult:
    """``users`` threads, each sending its questions one after another.

    A user starts no new request after ``duration`` seconds (requests in flight finish),
    or stops after ``per_user`` requests. User i uses ``tokens[i % len(tokens)]``.
    """
    assert url.startswith(("http://127.0.0.1", "http://localhost")), "loopback only"
    assert duration or per_user, "bound the run by duration or per_user"
    result = LoadResult(users=users, wall_s=0.0)
    lock = threading.Lock()
    start = time.perf_counter()
    deadline = start + duration if duration else float("inf")

    def user(index: int) -> None:
        turn = 0
        while time.perf_counter() < deadline and (per_user is None or turn < per_user):
            kind, question = question_for(index, turn)
            outcome = ask(url, tokens[index % len(tokens)], kind, question, timeout=timeout)
            with lock:
                result.outcomes.append(outcome)
            turn += 1

    threads = [threading.Thread(target=user, args=(i,)) for i in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.wall_s = time.perf_counter() - start
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", help="one token shared by every user")
    p.add_argument("--tokens-file", help="one token per line; user i uses line i")
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--duration", type=float, default=None, help="seconds during which users start requests")
    p.add_argument("--per-user", type=int, default=None, help="requests per user (instead of --duration)")
    opts = p.parse_args()
    if opts.tokens_file:
        with open(opts.tokens_file) as fh:
            tokens = [line.strip() for line in fh if line.strip()]
    elif opts.token:
        tokens = [opts.token]
    else:
        p.error("give --token or --tokens-file")
    per_user = opts.per_user if opts.per_user or opts.duration else 3
    result = run_load(opts.url, tokens, users=opts.users, duration=opts.duration, per_user=per_user)
    print(json.dumps(result.summary(), indent=2))


if __name__ == "__main__":
    main()
