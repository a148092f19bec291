# SPDX-License-Identifier: MIT
# Inputs of cases/data_inputs.tsv (#16, data inputs): FASTA inputs in
# formats ingest does not read, and copies of the shared dataset $W/data
# each broken in one way, under $W/dsi/. Sourced by run_cases.sh with $CLI
# and $W set; $W/data and $W/prot.fa are never modified.
D="$W/dsi"
mkdir -p "$D"
# A second ingest of the same FASTA: the same shards byte for byte but for
# the dataset id, so a shard copied across passes every other check.
"$CLI" ingest "$W/prot.fa" -o "$D/twin" --valid-fraction 0.2 --quiet >/dev/null || return 1
python3 - "$W/prot.fa" "$W/data" "$D" <<'PY' || return 1
import bz2, gzip, io, json, lzma, os, shutil, struct, sys, tarfile, zipfile, zlib
fasta, data, out = sys.argv[1], sys.argv[2], sys.argv[3]
raw = open(fasta, 'rb').read()
def put(name, b):
    open(os.path.join(out, name), 'wb').write(b)
# compressed or archived FASTA under misleading names
put('bz2.fa.gz', bz2.compress(raw))
put('xz.fa.gz', lzma.compress(raw))
put('zstd.fa.gz', b'\x28\xb5\x2f\xfd' + b'\x00' * 64)  # a zstd frame's magic number
zb = io.BytesIO()
with zipfile.ZipFile(zb, 'w') as z: z.writestr('prot.fa', raw)
put('zip.fa', zb.getvalue())
tb = io.BytesIO()
with tarfile.open(fileobj=tb, mode='w', format=tarfile.USTAR_FORMAT) as t:
    ti = tarfile.TarInfo('prot.fa'); ti.size = len(raw); t.addfile(ti, io.BytesIO(raw))
put('tar.fa', tb.getvalue())
put('gz-of-bz2.fa.gz', gzip.compress(bz2.compress(raw)))

def copy(name):
    d = os.path.join(out, name)
    shutil.copytree(data, d)
    return d
def manifest(d):
    return json.load(open(os.path.join(d, 'manifest.json')))
def save(d, m):
    json.dump(m, open(os.path.join(d, 'manifest.json'), 'w'), indent=2)
def patch(d, fmt, off, value, shard='train-00000.shard'):
    with open(os.path.join(d, shard), 'r+b') as f:
        f.seek(off); f.write(struct.pack(fmt, value))
def entry(m, file='train-00000.shard'):
    return next(e for e in m['shards'] if e['file'] == file)

d = copy('twice'); m = manifest(d); m['shards'].append(dict(entry(m))); save(d, m)
d = copy('version3'); m = manifest(d); m['version'] = 3; save(d, m)
d = copy('badid'); m = manifest(d); m['dataset_id'] = 'not-hex'; save(d, m)
d = copy('namesplit'); m = manifest(d); entry(m)['split'] = 'valid'; save(d, m)
# (without "stats", whose totals would disagree first)
d = copy('hdrsplit'); m = manifest(d); entry(m)['split'] = 'valid'; entry(m)['file'] = 'shard-a'
del m['stats']; save(d, m); os.rename(os.path.join(d, 'train-00000.shard'), os.path.join(d, 'shard-a'))
d = copy('records'); m = manifest(d); entry(m)['records'] += 1; del m['stats']; save(d, m)
d = copy('crc'); m = manifest(d); entry(m)['crc32'] ^= 1; save(d, m)
d = copy('stats'); m = manifest(d); m['stats']['records'] += 5; save(d, m)
d = copy('missing'); os.remove(os.path.join(d, 'valid-00000.shard'))
d = copy('foreign'); shutil.copy(os.path.join(out, 'twin', 'train-00000.shard'), d)
d = copy('idxoff'); patch(d, '<Q', 32, struct.unpack_from('<Q', open(os.path.join(d, 'train-00000.shard'), 'rb').read(), 32)[0] + 8)
d = copy('hdrsize'); patch(d, '<I', 12, 72)
d = copy('records-huge'); patch(d, '<Q', 16, 1 << 41)
d = copy('splitfield'); patch(d, '<I', 44, 7)
d = copy('grown'); open(os.path.join(d, 'train-00000.shard'), 'ab').write(b'\0' * 8)
# a token id ingest never writes (40), with the crc32 recomputed in the
# header and the manifest: only the id check can catch it
d = copy('badtoken'); p = os.path.join(d, 'train-00000.shard')
b = bytearray(open(p, 'rb').read()); b[64 + 100] = 40
crc = zlib.crc32(bytes(b[64:])); struct.pack_into('<I', b, 40, crc); open(p, 'wb').write(b)
m = manifest(d); entry(m)['crc32'] = crc; save(d, m)
# as written by an older build: version 1, no dataset id, reserved zero
def to_v1(d, shards=True):
    m = manifest(d); m['version'] = 1; del m['dataset_id']; save(d, m)
    for e in m['shards'] if shards else []:
        patch(d, '<I', 8, 1, e['file']); patch(d, '16s', 48, b'\0' * 16, e['file'])
to_v1(copy('v1'))
to_v1(copy('v1-v2shard'), shards=False)
PY
