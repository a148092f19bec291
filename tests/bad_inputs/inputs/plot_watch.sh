# SPDX-License-Identifier: MIT
# Inputs of cases/plot_watch.tsv (#35 plot and watch): a finished run to
# protect and to watch, metrics with extreme finite values, files of the
# user's beside them, and run.lock records whose pid is damaged or names
# another live process. Sourced by run_cases.sh with $CLI and $W set.
mkdir -p "$W/scratch"
cp -r "$W/run-ok" "$W/pw-run"
ln -s pw-run "$W/pw-runlink"
ln -s pw-run/checkpoints/step-00000003 "$W/pw-cklink"
echo "the user's notes" > "$W/pw-notes.png"
printf '\x89PNG\r\n\x1a\nan image from elsewhere' > "$W/pw-old.png"
ln -s pw-notes.png "$W/pw-link.png"
# pw_metrics NAME V...: one train and one eval record a value, every field that value
pw_metrics() {
  local name=$1 s=1 v
  shift
  mkdir -p "$W/pw-ext/$name"
  for v in "$@"; do
    printf '{"kind":"train","step":%d,"loss":%s,"lr":%s,"tokens":%s,"tokens_per_s":%s,"mfu":%s,"rss_mib":%s}\n' \
      "$s" "$v" "$v" "$v" "$v" "$v" "$v"
    printf '{"kind":"eval","step":%d,"loss":%s,"perplexity":%s,"accuracy":%s}\n' "$s" "$v" "$v" "$v"
    s=$((s + 1))
  done > "$W/pw-ext/$name/metrics.jsonl"
}
pw_metrics huge 1e308 -1e308 1e308
pw_metrics span -1e308 1e-308 1e308
pw_metrics tiny 1e-308 1e-308 1e-308
pw_metrics mixed 1e308 null -1e308 5e-324 null 1e308
ln "$W/pw-ext/tiny/metrics.jsonl" "$W/pw-hard.jsonl"
# pw_lock NAME PID: a finished run whose run.lock names PID on this host
pw_lock() {
  cp -r "$W/run-ok" "$W/$1"
  printf 'pid %s\nhost %s\nstarted 2026-01-01 00:00:00\ncommand esmtrain-example train\n' \
    "$2" "$(hostname)" > "$W/$1/run.lock"
}
pw_lock pw-w-init 4294967297  # 2^32 + 1: pid 1 in 32 bits
pw_lock pw-w-minus 4294967295 # -1 in 32 bits: kill(-1, 0) reaches every process
pw_lock pw-w-junk 12abc
pw_lock pw-w-reused $$        # alive (this shell), but not the writer: no run.lock open
