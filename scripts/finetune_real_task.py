# SPDX-License-Identifier: MIT
"""The held-out figures of scripts/finetune_real_task.sh.

  finetune_real_task.py score TABLE PRED [SPLIT]       accuracy and macro-F1 of `predict`'s
                                                       classes on TABLE's SPLIT rows (test)
  finetune_real_task.py majority TABLE - [SPLIT]      the most frequent training class
  finetune_real_task.py logreg TABLE EMBED_DIR [SPLIT] a multinomial logistic regression on
                                                       the mean embeddings (`embed`), L2
                                                       strength chosen on the valid rows

Each prints "accuracy A macro_f1 F n N" on SPLIT (test unless named: valid shows what the
choices were made on). numpy only (no scikit-learn here): macro-F1 is
the mean F1 over the classes in the labels or the predictions, as f1_score(average="macro").
"""
import csv
import glob
import os
import re
import sys

import numpy as np


def read_table(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


def figures(truth, pred):
    truth, pred = np.asarray(truth), np.asarray(pred)
    acc = float(np.mean(truth == pred))
    f1s = []
    for c in sorted(set(truth) | set(pred)):
        tp = np.sum((truth == c) & (pred == c))
        fp = np.sum((truth != c) & (pred == c))
        fn = np.sum((truth == c) & (pred != c))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return acc, float(np.mean(f1s)), len(truth)


def score(table, pred, which):
    split = {r["id"]: r["split"] for r in read_table(table)}
    rows = [r for r in read_table(pred) if split[r["id"]] == which]
    return figures([r["label"] for r in rows], [r["predicted"] for r in rows])


def majority(table, which):
    """Always the most frequent training class: the floor both must clear."""
    rows = read_table(table)
    train = [r["label"] for r in rows if r["split"] == "train"]
    top = max(sorted(set(train)), key=train.count)
    test = [r["label"] for r in rows if r["split"] == which]
    return figures(test, [top] * len(test))


def fit(x, y, k, l2, steps=500, lr=0.5):
    """Softmax regression by full-batch gradient descent on standardised features."""
    w = np.zeros((x.shape[1], k))
    b = np.zeros(k)
    onehot = np.eye(k)[y]
    for _ in range(steps):
        z = x @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) / len(y)
        w -= lr * (x.T @ g + l2 * w)
        b -= lr * g.sum(axis=0)
    return w, b


def logreg(table, embed_dir, which):
    rows = read_table(table)
    ids = open(os.path.join(embed_dir, "ids.txt")).read().split()
    # the last layer's (numerically: layer10 comes after layer9)
    means = sorted(glob.glob(os.path.join(embed_dir, "mean.layer*.npy")),
                   key=lambda p: int(re.search(r"layer(\d+)", p).group(1)))
    x = np.load(means[-1]).astype(np.float64)
    by_id = {r["id"]: r for r in rows}
    labels = sorted({r["label"] for r in rows if r["split"] == "train"})
    index = {c: i for i, c in enumerate(labels)}
    split = np.array([by_id[i]["split"] for i in ids])
    y = np.array([index.get(by_id[i]["label"], -1) for i in ids])
    tr, va, te = split == "train", split == "valid", split == which
    mu, sd = x[tr].mean(axis=0), x[tr].std(axis=0) + 1e-6
    x = (x - mu) / sd
    best = None
    for l2 in (1e-4, 1e-3, 1e-2, 1e-1, 1.0):
        w, b = fit(x[tr], y[tr], len(labels), l2)
        acc = float(np.mean(np.argmax(x[va] @ w + b, axis=1) == y[va]))
        if best is None or acc > best[0]:
            best = (acc, w, b)
    _, w, b = best
    pred = np.argmax(x[te] @ w + b, axis=1)
    return figures([labels[i] if i >= 0 else "?" for i in y[te]], [labels[i] for i in pred])


def main():
    what, table, other = sys.argv[1:4]
    which = sys.argv[4] if len(sys.argv) > 4 else "test"
    if what == "majority":
        acc, f1, n = majority(table, which)
    else:
        acc, f1, n = score(table, other, which) if what == "score" else logreg(table, other, which)
    print(f"accuracy {acc:.4f} macro_f1 {f1:.4f} n {n}")


if __name__ == "__main__":
    main()
