#!/usr/bin/env bash
# Regenerates the shipped model from the simulator: `make model` runs this.
# Same seeds → byte-identical model/decision-model.json (checked by the CLI's tests).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p decider-cli --release
DECIDER=target/release/decider
DATA=$(mktemp -d)
trap 'rm -rf "$DATA"' EXIT
"$DECIDER" simulate --rows 40000 --seed 20261130 --out "$DATA/train.jsonl"
extra=()
# The peer comparison (bench/peers.py, needs scikit-learn) is appended when present.
[ -f model/peers.md ] && extra=(--card-extra model/peers.md)
# The CLI's default base (a small network under the trees), a learning rate of 0.5 rather
# than the CLI's 0.15, up to 127 leaves a tree rather than 31, and at most 16 rounds (20 trees
# after the refit), chosen for latency: the shipped model runs on every request, and its cost
# is trees × depth (every tree is walked to depth 8) plus the network. Measured on 50,000
# fresh rows (simulator seed 777; the card's test seeds were not used to choose), accuracy /
# shifted accuracy (seed 778):
#   base     learning rate  leaves  rounds          trees  accuracy / shifted
#   network  0.5            127     16 (this one)   20     99.25% / 98.97%
#   network  0.3            127     16              20     99.02% / 98.81%
#   network  0.7            127     16              20     99.25% / 98.83%
#   network  1.0            127     16              20     99.11% / 98.80%
#   network  0.5            255     16              20     99.23% / 98.90%
#   network  0.5            63      14 (stopped)    18     99.15% / 98.77%
#   network  0.3            127     32              40     99.30% / 99.04%
#   network  0.3            127     64              79     99.42% / 99.20%
#   network  0.3            127     early-stopped   140    99.46% / 99.31%
#   network  0.15           31      early-stopped   317    99.44% / 99.28%
#   priors   0.3            127     16              20     99.53% / 99.37%
#   priors   0.3            63      early-stopped   65     99.53% / 99.42%
#   priors   0.3            127     25              32     99.52% / 99.41%
#   priors   0.5            63      16              20     99.42% / 99.13%
# On the simulator's axis-aligned policy the trees alone (`--base priors`) are ahead at every
# size; the network base is the default for policies whose boundaries mix features, where it
# is far ahead (model/peers.md).
"$DECIDER" train --data "$DATA/train.jsonl" --seed 42 --learning-rate 0.5 --max-leaves 127 --max-rounds 16 --out model/decision-model.json "${extra[@]}"
"$DECIDER" simulate --rows 10000 --seed 20261131 --out "$DATA/test.jsonl"
"$DECIDER" simulate --rows 10000 --seed 20261132 --shifted --out "$DATA/shifted.jsonl"
{
  echo
  echo "## Held-out evaluation (\`decider eval\`, fresh simulator seeds)"
  echo
  echo '```'
  echo "\$ decider eval --model model/decision-model.json --data test.jsonl   # 10000 rows, seed 20261131"
  "$DECIDER" eval --model model/decision-model.json --data "$DATA/test.jsonl"
  echo
  echo "\$ decider eval --model model/decision-model.json --data shifted.jsonl   # 10000 shifted rows, seed 20261132"
  "$DECIDER" eval --model model/decision-model.json --data "$DATA/shifted.jsonl"
  echo '```'
} >> model/decision-model.md
