#!/usr/bin/env bash
# Issue #21 on real proteins: the 20,000 UniProt proteins of Debian's
# mmseqs2-examples clustered by MMseqs2 (easy-cluster, 50% identity, 80%
# coverage), ingested with the clusters, then test_clusters' checks on them:
# no validation cluster in training, index clusters = MMseqs2's clusters,
# uniform clusters and members over epochs (chi-square), exact resume, two
# ranks. Usage: test_clusters_uniprot.sh TEST_CLUSTERS_BINARY
set -euo pipefail
test_bin=$1
fasta=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
if ! command -v mmseqs >/dev/null; then
  echo "SKIP: mmseqs not installed (scripts/setup_deps.sh installs Debian's mmseqs2)"; exit 77
fi
[ -f "$fasta" ] || { echo "SKIP: $fasta missing (Debian package mmseqs2-examples)"; exit 77; }
work=$(mktemp -d /tmp/esmt-clusters-XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
mmseqs easy-cluster "$fasta" "$work/clu" "$work/tmp" --min-seq-id 0.5 -c 0.8 --cov-mode 1 \
  --threads 2 -v 1 >/dev/null
echo "mmseqs easy-cluster at 50% identity: $(cut -f1 "$work/clu_cluster.tsv" | sort -u | wc -l)" \
     "clusters of $(wc -l < "$work/clu_cluster.tsv") proteins in $(( $(date +%s) - start )) s"
ESMT_TEST_CLUSTERS_FASTA=$fasta ESMT_TEST_CLUSTERS_TSV=$work/clu_cluster.tsv "$test_bin"
