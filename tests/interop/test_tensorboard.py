#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The run's TensorBoard event files, read by TensorBoard's own reader.

(a) a tiny CLI run (8 updates, logged every update, evaluated every 3):
    EventAccumulator finds every scalar tag, train/* at steps 1..8 and
    eval/* at 0 (before training), 3, 6 and 8, each step once; metrics.jsonl
    holds the same steps once each;
(b) a run interrupted after step 6 whose last checkpoint is step 3 (the
    metrics of steps 4-6 written, their checkpoint lost), resumed with
    --resume latest to step 8: TensorBoard shows each step once, steps 4
    and later from the resumed run only (its session start purges the
    orphans), and metrics.jsonl holds each step once.
Usage: test_tensorboard.py ESMTRAIN_EXAMPLE. Exit 77 = skipped.
"""
import collections
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except Exception as e:  # pragma: no cover
    print("skipped: tensorboard not importable (%s); run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

CLI = sys.argv[1]
TRAIN_TAGS = ["train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/mfu",
              "train/padding", "train/loss_scale", "train/overflows", "train/skipped",
              "train/rss_mib"]
EVAL_TAGS = ["eval/loss", "eval/perplexity", "eval/accuracy", "eval/unigram_perplexity"]


def run(*args):
    p = subprocess.run([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("FAIL: %s %s exited %d:\n%s" % (CLI, " ".join(args), p.returncode, p.stdout))
    return p.stdout


def train(data, out, *extra):
    return run("train", "--data", data, "--out", out, "--no-mfu", "--layers", "1", "--width", "16",
               "--heads", "2", "--warmup", "1", "--eval-every", "3", "--log-every", "1",
               "--save-every", "3", *extra)


def scalars(run_dir):
    acc = EventAccumulator(run_dir)  # purge_orphaned_data: as TensorBoard reads
    acc.Reload()
    return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}


def check_steps(got, want_train, want_eval, what):
    for tag in TRAIN_TAGS + EVAL_TAGS:
        if tag not in got:
            sys.exit("FAIL: %s: tag %s missing (tags: %s)" % (what, tag, sorted(got)))
        steps = [e.step for e in got[tag]]
        want = want_train if tag.startswith("train/") else want_eval
        if steps != want:
            sys.exit("FAIL: %s: %s at steps %s, expected %s" % (what, tag, steps, want))
    loss = [e.value for e in got["train/loss"]]
    if not all(v == v and 0 < v < 10 for v in loss):
        sys.exit("FAIL: %s: train/loss values %s" % (what, loss))


def check_jsonl(run_dir, want_train, want_eval, what):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    by_kind = collections.defaultdict(list)
    for rec in lines:
        by_kind[rec["kind"]].append(rec["step"])
    if by_kind["train"] != want_train or by_kind["eval"] != want_eval:
        sys.exit("FAIL: %s: metrics.jsonl has train steps %s, eval steps %s; expected %s, %s"
                 % (what, by_kind["train"], by_kind["eval"], want_train, want_eval))


def main():
    work = tempfile.mkdtemp(prefix="esmt-tb-")
    try:
        rng = random.Random(7)
        fasta = os.path.join(work, "prot.fa")
        with open(fasta, "w") as f:
            for r in range(200):
                n = rng.randint(20, 80)
                f.write(">r%d\n%s\n" % (r, "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY")
                                                   for _ in range(n))))
        data = os.path.join(work, "data")
        run("ingest", fasta, "-o", data, "--valid-fraction", "0.2", "--quiet")

        # (a) one run
        a = os.path.join(work, "a")
        train(data, a, "--steps", "8")
        events = glob.glob(os.path.join(a, "events.out.tfevents.*.esmtrain"))
        if len(events) != 1:
            sys.exit("FAIL: (a) event files %s" % events)
        check_steps(scalars(a), list(range(1, 9)), [0, 3, 6, 8], "(a)")
        check_jsonl(a, list(range(1, 9)), [0, 3, 6, 8], "(a)")
        print("(a) every scalar at its steps:", ", ".join(TRAIN_TAGS + EVAL_TAGS))

        # (b) the state of a run stopped hard after step 6 with its last
        # checkpoint at 3: a copy of the run at step 3 given the metrics
        # files the same run wrote through step 6
        x, y = os.path.join(work, "x"), os.path.join(work, "y")
        train(data, x, "--steps", "3")
        shutil.copytree(x, y)
        time.sleep(1.1)  # the next event file gets a later name (seconds)
        train(data, x, "--resume", "latest", "--steps", "6")
        shutil.copy(os.path.join(x, "metrics.jsonl"), y)
        for ev in glob.glob(os.path.join(x, "events.out.tfevents.*")):
            shutil.copy(ev, y)
        before = scalars(y)
        if [e.step for e in before["train/loss"]] != list(range(1, 7)):
            sys.exit("FAIL: (b) the interrupted run's steps: %s" % [e.step for e in before["train/loss"]])
        time.sleep(1.1)
        resumed_at = time.time()
        out = train(data, y, "--resume", "latest", "--steps", "8")
        if "from step 3" not in out:
            sys.exit("FAIL: (b) expected a resume from step 3:\n" + out)
        got = scalars(y)
        check_steps(got, list(range(1, 9)), [0, 3, 6, 8], "(b)")
        for tag in TRAIN_TAGS + EVAL_TAGS:
            for e in got[tag]:
                if e.step >= 4 and e.wall_time < resumed_at:
                    sys.exit("FAIL: (b) %s at step %d is the interrupted run's (orphan not purged)"
                             % (tag, e.step))
        check_jsonl(y, list(range(1, 9)), [0, 3, 6, 8], "(b)")
        print("(b) resumed at step 3 after an interruption at 6: each step once, "
              "steps 4-8 from the resumed run")
        print("test_tensorboard: 2 passed, 0 failed")
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
