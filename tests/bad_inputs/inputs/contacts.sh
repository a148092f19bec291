# SPDX-License-Identifier: MIT
# Inputs of cases/contacts.tsv (#42 contacts): a FASTA whose first record
# is empty. Sourced by run_cases.sh with $CLI and $W set.
printf '>blank\n>a\nMKVLAGG\n' > "$W/contacts-empty.fa"
