/* SPDX-License-Identifier: MIT */
/* A plugin that needs a shared library the loader cannot find (linked
 * against libesmt_missing_dep.so.1, built outside every search path), like
 * a GPU backend on a machine whose CUDA libraries are not on the loader
 * path: the registry must say which library is missing and what to do. */
int esmt_missing_dep_value(void);
int esmt_test_needs_dep(void) { return esmt_missing_dep_value(); }
