"""Cold-start latency of ``foundry query``: each question asked by a fresh ``foundry`` process.

    .venv/bin/python bench/cold_query.py [--runs 15] [--home DIR] [--code NAME=PATH ...] [--json out.json]

Set-up as ``make run``: knowledge_base/ ingested into a throw-away FOUNDRY_HOME (or ``--home``, a home
that already holds it: nothing is ingested again). The config is foundry.yaml with one change,
``generation.cache_answers: false`` (written to FOUNDRY_CONFIG in the home): the questions repeat, and a
cached answer would skip the embedding and the reader, the work measured here.

``--code NAME=PATH`` runs the same ``foundry`` script with PATH first on PYTHONPATH (a checkout of
another version); several are asked in turn within each round, so load on a shared machine falls on
all of them alike. Per version: wall time and CPU time (user + system) of the process, P50/P95 with
a 95 % percentile-bootstrap interval (2,000 resamples, seeded), the answer's own stage timings, and
the import time per top-level package of one extra ``python -X importtime`` run. Each version first answers
one untimed question: what a first run does once per machine (exporting MiniLM to ONNX into the model cache,
``core/llm/minilm.py``) is not a cold start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "How many sensors can be connected to the RS-485 bus?",
    "What is the default sampling interval?",
    "Which port does MQTT over TLS use?",
    "Who painted the Mona Lisa?",
]
FOUNDRY = Path(sys.executable).with_name("foundry")


def environment(home: Path, code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"FOUNDRY_HOME", "FOUNDRY_CONFIG", "PYTHONPATH"}}
    env.update(
        FOUNDRY_HOME=str(home),
        FOUNDRY_CONFIG=str(home / "bench-foundry.yaml"),
        PYTHONPATH=str(code),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def home_prepare(home: Path) -> None:
    """foundry.yaml with the answer cache off, and knowledge_base/ ingested (a no-op when it already is)."""
    config = yaml.safe_load((ROOT / "foundry.yaml").read_text())
    config["generation"]["cache_answers"] = False
    (home / "bench-foundry.yaml").write_text(yaml.safe_dump(config))
    subprocess.run(
        [str(FOUNDRY), "ingest", str(ROOT / "knowledge_base")],
        env=environment(home, ROOT),
        check=True,
        capture_output=True,
    )


def cold_query(home: Path, code: Path, question: str) -> dict:
    """One ``foundry query --json`` in a new process: its wall and CPU seconds and the answer's timings."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [str(FOUNDRY), "query", question, "--json"],
        env=environment(home, code),
        cwd=code,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"foundry query failed ({code}): {done.stderr[-2000:]}")
    answer = json.loads(done.stdout)
    if answer.get("cached"):
        raise SystemExit("the answer came from the cache: the bench config must switch generation.cache_answers off")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "timings_ms": answer["timings"], "answer_class": answer["answer_class"]}


def import_profile(home: Path, code: Path, question: str, top: int = 10) -> dict[str, float]:
    """Seconds of import time per top-level package (``-X importtime`` self times), the largest first."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(FOUNDRY), "query", question, "--json"],
        env=environment(home, code),
        cwd=code,
        capture_output=True,
        text=True,
        check=True,
    )
    per_package: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:") :].split("|")
        package = name.strip().split(".")[0]
        per_package[package] = per_package.get(package, 0.0) + int(self_us) / 1e6
    ranked = sorted(per_package.items(), key=lambda item: -item[1])
    return {name: round(seconds, 2) for name, seconds in ranked[:top]} | {"total": round(sum(per_package.values()), 2)}


def summary(values: list[float]) -> dict:
    """P50 and P95 with their 95 % percentile-bootstrap intervals."""
    data = np.asarray(values, dtype=float)
    out: dict = {"n": len(values)}
    for q in (50, 95):
        found = stats.bootstrap(
            (data,),
            lambda x, axis=-1, q=q: np.percentile(x, q, axis=axis),
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(0),
        )
        interval = found.confidence_interval
        out[f"p{q}"] = round(float(np.percentile(data, q)), 2)
        out[f"p{q}_ci95"] = [round(float(interval.low), 2), round(float(interval.high), 2)]
    return out


def stage_medians(runs: list[dict]) -> dict[str, float]:
    stages = sorted({stage for run in runs for stage in run["timings_ms"]})
    return {s: round(float(np.median([r["timings_ms"].get(s, 0.0) for r in runs])), 1) for s in stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="questions asked per version")
    parser.add_argument("--home", type=Path, help="a FOUNDRY_HOME to reuse (default: a new temporary one)")
    parser.add_argument("--code", action="append", default=[], metavar="NAME=PATH", help="a version to time")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    versions = dict(item.split("=", 1) for item in args.code) or {"this": str(ROOT)}
    home = args.home or Path(tempfile.mkdtemp(prefix="foundry-coldq-"))
    home.mkdir(parents=True, exist_ok=True)
    home_prepare(home)
    for code in versions.values():  # untimed: a version's first question may build a cache (the ONNX export)
        cold_query(home, Path(code), QUESTIONS[0])
    runs: dict[str, list[dict]] = {name: [] for name in versions}
    for i in range(args.runs):
        order = list(versions.items()) if i % 2 == 0 else list(reversed(versions.items()))
        for name, code in order:
            run = cold_query(home, Path(code), QUESTIONS[i % len(QUESTIONS)])
            runs[name].append(run)
            print(f"{i + 1:3d} {name:10s} wall {run['wall_s']:6.2f} s  cpu {run['cpu_s']:6.2f} s", flush=True)
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": os.uname().machine,
        "cpu": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), ""),
        "load_1min_end": round(os.getloadavg()[0], 2),
        "runs_per_version": args.runs,
        "questions": QUESTIONS,
        "versions": {
            name: {
                "code": versions[name],
                "wall_s": summary([r["wall_s"] for r in rs]),
                "cpu_s": summary([r["cpu_s"] for r in rs]),
                "answer_timings_median_ms": stage_medians(rs),
                "import_s": import_profile(home, Path(versions[name]), QUESTIONS[0]),
                "runs": rs,
            }
            for name, rs in runs.items()
        },
    }
    for name, found in results["versions"].items():
        w, c = found["wall_s"], found["cpu_s"]
        print(
            f"{name}: wall P50 {w['p50']} s {w['p50_ci95']}, P95 {w['p95']} s {w['p95_ci95']}; "
            f"cpu P50 {c['p50']} s {c['p50_ci95']}; stages {found['answer_timings_median_ms']}; "
            f"imports {found['import_s']}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
