# SPDX-License-Identifier: MIT
"""A content-keyed cache for what third-party code computes for the tests
(float64 references from torch/transformers), so that the Release and the
sanitizer runs of one CI compute each reference once. Never for the output
of esmtrain's own code.

Entries live in ${XDG_CACHE_HOME:-$HOME/.cache}/esmtrain-tests/ (outside
any build directory), named by a SHA-256 key over everything that decides
the content (the caller's inputs, the reference code's source, the tool
versions). Each entry is NAME.npz plus NAME.npz.sha256 (the SHA-256 of the
.npz), both written to a temporary file in the same directory and renamed
into place; an entry whose bytes do not match its .sha256, or that does not
load, is recomputed and rewritten. ESMT_TEST_CACHE=0 turns the cache off
(every reference computed).
"""
import hashlib
import io
import os
import tempfile

import numpy as np


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "esmtrain-tests")


def enabled():
    return os.environ.get("ESMT_TEST_CACHE", "1") not in ("0", "off", "no", "false")


class Key:
    """An incremental SHA-256 over typed, length-prefixed parts (so that
    ("ab", "c") and ("a", "bc") differ)."""

    def __init__(self, tag):
        self.h = hashlib.sha256()
        self.add(tag)

    def add(self, part):
        if isinstance(part, np.ndarray):
            a = np.ascontiguousarray(part)
            self._put(b"nd", ("%s %s" % (a.dtype.str, a.shape)).encode())
            self._put(b"nb", a.tobytes())
        elif isinstance(part, bytes):
            self._put(b"by", part)
        else:
            self._put(b"st", repr(part).encode())
        return self

    def _put(self, kind, data):
        self.h.update(kind + len(data).to_bytes(8, "little") + data)

    def hexdigest(self):
        return self.h.hexdigest()


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def load(name):
    """The dict of arrays of entry NAME, or None (missing, off, or damaged)."""
    if not enabled():
        return None
    path = os.path.join(cache_dir(), name + ".npz")
    try:
        with open(path, "rb") as f:
            data = f.read()
        with open(path + ".sha256") as f:
            want = f.read().strip()
    except OSError:
        return None
    if _sha256(data) != want:
        print("cache: %s does not match its .sha256; recomputing" % path)
        return None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # a damaged entry is recomputed
        print("cache: %s unreadable (%s); recomputing" % (path, e))
        return None


def _write_atomic(directory, final, data):
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store(name, arrays):
    """Writes entry NAME (best effort: a cache that cannot be written only
    costs the next run the computation)."""
    if not enabled():
        return
    d = cache_dir()
    try:
        os.makedirs(d, exist_ok=True)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        data = buf.getvalue()
        path = os.path.join(d, name + ".npz")
        # the data first: a reader needs both and a match, so a crash
        # between the two renames leaves an entry that is recomputed
        _write_atomic(d, path, data)
        _write_atomic(d, path + ".sha256", (_sha256(data) + "\n").encode())
    except OSError as e:
        print("cache: not written (%s)" % e)


def cached(name, compute):
    """compute()'s dict of arrays, from entry NAME when it is there and sound."""
    got = load(name)
    if got is not None:
        print("cache: %s from %s" % (name, cache_dir()))
        return got
    out = compute()
    store(name, out)
    return out
