# SPDX-License-Identifier: MIT
# Inputs of cases/checkpoints.tsv (#16 checkpoints, resume, HF import):
# damaged copies of $W/run-ok and $W/hfexp, and hand-made safetensors
# files. Sourced by run_cases.sh with $CLI and $W set.

# ck_copy NAME: a copy of the finished tiny run (checkpoints/step-00000003).
ck_copy() { cp -r "$W/run-ok" "$W/$1" && rm -f "$W/$1/run.lock"; }
ck_state() { echo "$W/$1/checkpoints/step-00000003/state.json"; }

# state.json (written with a 2-space indent) with its file table emptied,
# and without the optimizer's entry
ck_copy ck-files-empty
awk '/^  "files": \{/ { print "  \"files\": {},"; skip = 1; next }
     skip && /^  \},?$/ { skip = 0; next } !skip' "$(ck_state ck-files-empty)" > "$W/tmp.json" &&
  mv "$W/tmp.json" "$(ck_state ck-files-empty)"
ck_copy ck-files-noopt
awk '/^    "optimizer.safetensors": \{/ { skip = 1; next }
     skip { if ($0 ~ /^    \}/) skip = 0; next } { print }' "$(ck_state ck-files-noopt)" |
  awk '{ lines[NR] = $0 } END { for (i = 1; i <= NR; i++) { l = lines[i];
         if (l ~ /^    \},$/ && lines[i + 1] ~ /^  \}/) sub(/,$/, "", l); print l } }' > "$W/tmp.json" &&
  mv "$W/tmp.json" "$(ck_state ck-files-noopt)"
# a checkpoint moved under another step's name; a trainer step that differs
ck_copy ck-renamed
mv "$W/ck-renamed/checkpoints/step-00000003" "$W/ck-renamed/checkpoints/step-00000005"
printf 'step-00000005' > "$W/ck-renamed/checkpoints/latest"
ck_copy ck-trainer-step
sed -i 's/^    "step": 3,$/    "step": 4,/' "$(ck_state ck-trainer-step)"
# optimizer state of an optimizer this library does not know
ck_copy ck-optimizer-kind
sed -i 's/^  "optimizer": "adamw",$/  "optimizer": "sgd",/' "$(ck_state ck-optimizer-kind)"
grep -q '"optimizer": "sgd"' "$(ck_state ck-optimizer-kind)" || { echo "ck-optimizer-kind: no optimizer field"; exit 1; }
# state labelled as another optimizer's: refused by a model of the configured one
ck_copy ck-optimizer-other
sed -i 's/^  "optimizer": "adamw",$/  "optimizer": "lion",/' "$(ck_state ck-optimizer-other)"
grep -q '"optimizer": "lion"' "$(ck_state ck-optimizer-other)" || { echo "ck-optimizer-other: no optimizer field"; exit 1; }
# the baseline's residue counts: one negative, one missing
ck_copy ck-aa-negative
sed -i '0,/^      390,$/s//      -390,/' "$(ck_state ck-aa-negative)"
ck_copy ck-aa-short
sed -i '0,/^      0,$/{//d}' "$(ck_state ck-aa-short)"
# checkpoints/latest: empty, garbage, naming a checkpoint that is gone
for r in ck-latest-empty ck-latest-garbage ck-latest-dangling; do ck_copy "$r"; done
: > "$W/ck-latest-empty/checkpoints/latest"
printf '\x00\x01garbage\n' > "$W/ck-latest-garbage/checkpoints/latest"
printf 'step-00000009' > "$W/ck-latest-dangling/checkpoints/latest"

# HF config.json integers: past 32 bits, past INT_MAX, not integers
hf_copy() { cp -r "$W/hfexp" "$W/$1"; }
hf_set() { sed -i "s/^  \"$2\": [^,]*,/  \"$2\": $3,/" "$W/$1/config.json"; }
hf_copy hf-hidden-2p32 && hf_set hf-hidden-2p32 hidden_size 4294967312
hf_copy hf-mpe-2p31 && hf_set hf-mpe-2p31 max_position_embeddings 2147483648
hf_copy hf-heads-float && hf_set hf-heads-float num_attention_heads 1.5
hf_copy hf-layers-string && hf_set hf-layers-string num_hidden_layers '"1"'
hf_copy hf-ffn-bool && hf_set hf-ffn-bool intermediate_size true

# Hand-made safetensors files beside a valid config.json: st_dir NAME
# HEADER DATA_BYTES writes $W/NAME/model.safetensors with that JSON header.
st_dir() {
  local d="$W/$1" n=${#2}
  mkdir -p "$d" && cp "$W/hfexp/config.json" "$d/"
  { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((n & 255)) \
      $(((n >> 8) & 255)) $(((n >> 16) & 255)) $(((n >> 24) & 255)))"
    printf '%s' "$2"; head -c "$3" /dev/zero; } > "$d/model.safetensors"
}
st_dir st-overlap '{"esm.embeddings.word_embeddings.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"esm.encoder.emb_layer_norm_after.bias":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}' 16
st_dir st-past-end '{"w":{"dtype":"F32","shape":[200],"data_offsets":[0,800]}}' 16
st_dir st-backwards '{"w":{"dtype":"F32","shape":[1],"data_offsets":[12,8]}}' 16
st_dir st-size '{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 16
st_dir st-huge-shape '{"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}}' 16
st_dir st-duplicate '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}' 16
mkdir -p "$W/st-hlen" && cp "$W/hfexp/config.json" "$W/st-hlen/"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{"w":{}}' > "$W/st-hlen/model.safetensors"
