# SPDX-License-Identifier: MIT
# Inputs of cases/contacts.tsv (#42 contacts): a FASTA whose first record
# is empty, one protein longer than the window. Sourced by run_cases.sh
# with $CLI and $W set.
printf '>blank\n>a\nMKVLAGG\n' > "$W/contacts-empty.fa"
# a protein of 1100 residues: over the window of run-ok's model (1022)
awk 'BEGIN { srand(9); printf(">long1100\n"); for (i = 0; i < 1100; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1)); printf("\n") }' > "$W/contacts-long.fa"
