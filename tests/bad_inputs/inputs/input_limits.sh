# SPDX-License-Identifier: MIT
# Inputs of cases/input_limits.tsv (#35: every input bounded and
# interruptible, text from files printed escaped): files over a limit, with
# a NUL byte or with terminal escapes. FIFOs are made by the cases
# themselves, under $W/scratch. Sourced by run_cases.sh with $CLI and $W set.
L="$W/il"
mkdir -p "$L"
printf 'id,mutation\na,M1A\0zz\n' > "$L/nul.csv"
{ printf 'id,mutation\na,'; head -c $((17 << 20)) /dev/zero | tr '\0' 'M'; printf '\n'; } > "$L/long.csv"
printf 'id,mutation\n\033[31mred,M1A\n' > "$L/esc.csv"
printf 'r0\tr0\nr0\tr1\0x\n' > "$L/nul.tsv"
{ printf 'r0\tr0\nr0\t'; head -c $((70 << 10)) /dev/zero | tr '\0' 'r'; printf '\n'; } > "$L/long.tsv"
{ printf 'optimizer:\n  lr: 1e-3\n'; head -c $(((1 << 20) + 100)) /dev/zero | tr '\0' '#'; printf '\n'; } > "$L/big.yaml"
printf 'optimizer:\n  lr: 1e-3\0\n' > "$L/nul.yaml"
printf 'optimizer:\n  lr: "\\e[31mfast"\n' > "$L/escval.yaml"
printf 'optimizer:\n  "l\\er": 1\n' > "$L/esckey.yaml"
# no_raw_esc CMD...: runs CMD, prints its output and exits with its status,
# or 99 when the output holds a raw ESC byte (a terminal escape let through).
no_raw_esc() {
  local out rc
  out=$("$@" 2>&1); rc=$?
  printf '%s\n' "$out"
  if printf '%s' "$out" | grep -q $'\x1b'; then echo "a raw ESC byte in the output"; return 99; fi
  return $rc
}
export -f no_raw_esc
