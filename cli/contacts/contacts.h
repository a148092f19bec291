/* SPDX-License-Identifier: MIT */
/* The `contacts` command's parts (cmd_contacts.c: options and contact
 * maps; contacts_png.c: --png; contacts_train.c: --train-head). */
#ifndef ESMT_CLI_CONTACTS_H
#define ESMT_CLI_CONTACTS_H

#include "cli.h"

#define CONTACTS_PREFIX "esmtrain-example: contacts: "

typedef struct contacts_args {
  const char *model, *input, *out, *backend, *train_pairs;
  const char *png; /* --png DIR: a new directory of ID.png heat maps */
  long long threads, min_separation, stride;
  double l2;
  int quiet, windows; /* windows: --long windows (else proteins over the window are refused) */
  int npy;            /* --format npy: a directory of ID.npy files (esmt_contact_dir) */
} contacts_args;

/* --train-head: fit the contact head on INPUT's proteins and the pairs
 * file, then export the model with it as a new Hugging Face directory at
 * a->out. Returns the exit status (messages printed). */
int contacts_train_run(const contacts_args *a, esmt_model *model);

/* contacts_png.c: whether this build draws (cairo), and one protein's map
 * as ID.png in dir. Returns 0, or 1 with a message printed. */
int contacts_png_available(void);
int contacts_png_write(esmt_contact_dir *dir, const char *id, const float *map, int n);

#endif
