#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Append one benchmark result as a JSON line, with the commit and the machine.

Every benchmark in bench/ calls this (shell scripts as a command, Python ones
through record()), so that a results line always has the same fields:

  {"bench": "cpu_train_step", "config": "esm2_t6_8M 4x512, 2 threads",
   "time": "2026-...Z", "commit": "abc1234", "dirty": false,
   "machine": {"cpu": "...", "cores": 16, "gpu": "NVIDIA H100 ..." or null},
   "command": "bash bench/bench_vs_torch.sh ...",
   "figures": {"tokens_per_s": {"value": 1234.0, "unit": "tok/s"}},
   "peer": {"name": "torch", "figures": {...}} or null,
   "ratio": {"of": "tokens_per_s", "value": 1.5, "means": "esmtrain / torch"} or null}

The file is $ESMT_BENCH_RESULTS, else bench/results/results.jsonl.

Usage: record.py BENCH --config TEXT --command TEXT --figure NAME=VALUE:UNIT...
                 [--peer NAME --peer-figure NAME=VALUE:UNIT...]
                 [--ratio NAME=VALUE:MEANS]
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_RESULTS = os.path.join(HERE, "results", "results.jsonl")


def results_path():
    return os.environ.get("ESMT_BENCH_RESULTS") or DEFAULT_RESULTS


def _git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _dirty():
    """Uncommitted changes to the code measured: the results file and the
    table generated from it do not count (a run of several benchmarks
    writes them as it goes)."""
    rows = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    own = {"bench/results/results.jsonl", "docs/performance.md"}
    return any(r[3:].strip() not in own for r in rows if r.strip())


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.strip()
            names = [n.strip() for n in out.splitlines() if n.strip()]
            if names:
                gpu = names[0] if len(names) == 1 else f"{len(names)} x {names[0]}"
        except (OSError, subprocess.SubprocessError):
            pass
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": gpu}


def parse_figure(text):
    """NAME=VALUE:UNIT -> (name, {"value": float, "unit": unit})."""
    name, sep, rest = text.partition("=")
    value, _, unit = rest.partition(":")
    if not sep or not name or not value:
        raise ValueError(f"a figure is NAME=VALUE:UNIT, not '{text}'")
    return name, {"value": float(value), "unit": unit}


def record(bench, config, command, figures, peer=None, peer_figures=None, ratio=None):
    """Append the line and return it. figures: {name: (value, unit)}; ratio:
    (of, value, means)."""
    line = {
        "bench": bench,
        "config": config,
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _git("rev-parse", "--short=12", "HEAD"),
        "dirty": _dirty(),
        "machine": machine(),
        "command": command,
        "figures": {k: {"value": float(v), "unit": u} for k, (v, u) in figures.items()},
        "peer": None,
        "ratio": None,
    }
    if peer:
        line["peer"] = {"name": peer, "figures": {k: {"value": float(v), "unit": u}
                                                  for k, (v, u) in (peer_figures or {}).items()}}
    if ratio:
        line["ratio"] = {"of": ratio[0], "value": float(ratio[1]), "means": ratio[2]}
    path = results_path()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=False) + "\n")
    print("result: " + json.dumps(line), flush=True)
    return line


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("bench")
    ap.add_argument("--config", required=True, help="what was measured: model, shape, threads")
    ap.add_argument("--command", required=True, help="the command that reproduces it")
    ap.add_argument("--figure", action="append", default=[], help="NAME=VALUE:UNIT")
    ap.add_argument("--peer", help="the peer measured in the same run")
    ap.add_argument("--peer-figure", action="append", default=[], help="NAME=VALUE:UNIT")
    ap.add_argument("--ratio", help="NAME=VALUE:MEANS, e.g. tokens_per_s=1.5:esmtrain / torch")
    a = ap.parse_args(argv)
    try:
        figs = dict(parse_figure(t) for t in a.figure)
        peer_figs = dict(parse_figure(t) for t in a.peer_figure)
        ratio = None
        if a.ratio:
            name, r = parse_figure(a.ratio)
            ratio = (name, r["value"], r["unit"])
    except ValueError as e:
        print(f"record.py: {e}", file=sys.stderr)
        return 2
    if not figs:
        print("record.py: at least one --figure", file=sys.stderr)
        return 2
    record(a.bench, a.config, a.command,
           {k: (v["value"], v["unit"]) for k, v in figs.items()}, a.peer,
           {k: (v["value"], v["unit"]) for k, v in peer_figs.items()}, ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
