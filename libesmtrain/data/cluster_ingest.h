/* SPDX-License-Identifier: MIT */
/* Clusters during an ingest (esmt_ingest_options.clusters): each kept
 * record is given its cluster (cluster_map.h; a record no line names is a
 * cluster of its own) and the hash its split is drawn from (the
 * representative's, so that whole clusters go to validation); at the end
 * each split's cluster index is written (cluster_index.h) and the manifest
 * gets its "clusters" entry. Memory: the map, plus 4 bytes per record. */
#ifndef ESMTRAIN_CLUSTER_INGEST_H
#define ESMTRAIN_CLUSTER_INGEST_H

#include <jansson.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"
#include "shard_format.h"

typedef struct esmt_cluster_ingest esmt_cluster_ingest;

/* A record goes to validation when (split hash mod ESMT_SPLIT_MODULUS) /
 * ESMT_SPLIT_MODULUS < valid_fraction. */
#define ESMT_SPLIT_MODULUS 1000000007ull

/* Read the cluster file. valid_clusters > 0: that many listed clusters
 * (those whose representatives hash lowest) are held out instead of a
 * fraction; more than the file lists is an error. */
ESMT_HIDDEN esmt_status esmt_cluster_ingest_open(const char *path, uint64_t valid_clusters,
                                                 esmt_progress_fn progress, void *user,
                                                 esmt_cluster_ingest **out);
/* With valid_clusters: 1 when `cluster` is one of those held out. */
ESMT_HIDDEN int esmt_cluster_ingest_held_out(const esmt_cluster_ingest *ci, uint32_t cluster);
/* The record `id` (hash `id_hash`): its cluster and the hash to split by.
 * A UniProt id "db|ACCESSION|NAME" (sp|P12345|..., tr|...) that no line
 * names is looked up by its accession, as MMseqs2 writes UniProt ids. */
ESMT_HIDDEN esmt_status esmt_cluster_ingest_assign(esmt_cluster_ingest *ci, const char *id,
                                                   uint64_t id_hash, uint64_t *split_hash,
                                                   uint32_t *cluster);
/* The record just written to `split` (0 train, 1 valid) is in `cluster`. */
ESMT_HIDDEN esmt_status esmt_cluster_ingest_add(esmt_cluster_ingest *ci, int split,
                                                uint32_t cluster);
/* Write dir/train.clusters and dir/valid.clusters (for the splits that have
 * records), fill the stats' cluster fields and return the manifest's
 * "clusters" object in *manifest (new reference). */
ESMT_HIDDEN esmt_status esmt_cluster_ingest_finish(esmt_cluster_ingest *ci, const char *dir,
                                                   const uint8_t id[ESMT_DATASET_ID_BYTES],
                                                   esmt_ingest_stats *stats, json_t **manifest);
ESMT_HIDDEN void esmt_cluster_ingest_free(esmt_cluster_ingest *ci);

#endif
