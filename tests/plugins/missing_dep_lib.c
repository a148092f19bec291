/* SPDX-License-Identifier: MIT */
int esmt_missing_dep_value(void) { return 1; }
