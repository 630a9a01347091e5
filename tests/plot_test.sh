#!/usr/bin/env bash
# experiments/plot.py on a small results file: every figure it promises for
# the rows given (time, bus bandwidth, traffic with wire bytes, measured vs
# model, time vs N at each common size, ps per k; training accuracy against time and the step-time
# breakdown) is written as PNG and SVG. Skipped (77) without matplotlib.
set -euo pipefail
plot=$1
python=${2:-/usr/bin/python3}
"$python" -c 'import matplotlib' 2>/dev/null || { echo "no matplotlib: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{
  echo '{"record": "experiment", "spec": {"name": "t"}}'
  for n in 2 4; do
    for alg in ps ring; do
      for bytes in 65536 1048576; do
        t=$((bytes / 100 * n)); m=$((bytes / 110 * n))
        echo "{\"record\": \"result\", \"algorithm\": \"$alg\", \"workers\": $n, \"bytes\": $bytes, \"time_us_avg\": $t, \"busbw_gbps\": 0.1, \"payload_bytes_total\": $((bytes * n)), \"theory_bytes_total\": $((bytes * n)), \"wire_bytes_sent_total\": $((bytes * n + 100)), \"wire_bytes_received_total\": $((bytes * n + 100)), \"model_time_us\": $m, \"transport\": \"ucx:tcp/eth0.0\"}"
      done
    done
  done
} > "$dir/r.jsonl"
"$python" "$plot" "$dir/r.jsonl" --out "$dir/fig"
for name in time_n2 busbw_n2 traffic_n2 model_n2 time_n4 model_n4 time_vs_n busbw_vs_n \
    time_vs_n_64KiB busbw_vs_n_64KiB; do
  for ext in png svg; do
    [[ -s "$dir/fig/$name.$ext" ]] || { echo "missing $name.$ext"; ls "$dir/fig"; exit 1; }
  done
done
# ps with several server counts: a line per k, named by it.
sed 's/"algorithm": "ps"/"algorithm": "ps", "servers": 2/' "$dir/r.jsonl" > "$dir/k.jsonl"
grep '"algorithm": "ps"' "$dir/r.jsonl" | sed 's/"algorithm": "ps"/"algorithm": "ps", "servers": 4/' \
  >> "$dir/k.jsonl"
"$python" "$plot" "$dir/k.jsonl" --out "$dir/k_fig"
for k in 2 4; do
  grep -q "ps k=$k" "$dir/k_fig/time_vs_n.svg" || { echo "no ps k=$k line in time_vs_n"; exit 1; }
done
# `testbed train --out` rows (int64 fields as strings, as protobuf writes them).
for sync in ps ring; do
  for step in 100 200; do
    echo "{\"kind\": \"PROGRESS\", \"sync\": \"$sync\", \"workers\": 2, \"parameters\": \"101770\", \"bucket_bytes\": \"0\", \"step\": \"$step\", \"training_seconds\": 0.$step, \"test_accuracy\": 0.8}"
  done
  echo "{\"kind\": \"RUN\", \"sync\": \"$sync\", \"workers\": 2, \"parameters\": \"101770\", \"bucket_bytes\": \"1048576\", \"overlap\": true, \"step\": \"200\", \"compute_seconds\": 0.001, \"communication_seconds\": 0.002, \"overlapped_communication_seconds\": 0.0005}"
done > "$dir/train.jsonl"
# A sweep's rows (training_tradeoffs): schemes by name, over N; step time
# against N is drawn from each run's last PROGRESS interval.
for scheme in ring ps-S1; do
  for n in 2 4; do
    for step in 10 20; do
      echo "{\"kind\": \"PROGRESS\", \"sync\": \"ring\", \"scheme\": \"$scheme\", \"model\": \"small\", \"link_rate\": \"100mbit\", \"workers\": $n, \"parameters\": \"101770\", \"bucket_bytes\": \"0\", \"step\": \"$step\", \"training_seconds\": 0.$step, \"step_seconds\": 0.0$n, \"test_accuracy\": 0.7}"
    done
    echo "{\"kind\": \"RUN\", \"sync\": \"ring\", \"scheme\": \"$scheme\", \"model\": \"small\", \"link_rate\": \"100mbit\", \"workers\": $n, \"parameters\": \"101770\", \"step\": \"20\", \"step_seconds\": 0.0$n, \"compute_seconds\": 0.001, \"communication_seconds\": 0.002}"
  done
done >> "$dir/train.jsonl"
"$python" "$plot" "$dir/train.jsonl" --out "$dir/train_fig"
for name in train_accuracy train_step_time train_step_vs_n; do
  for ext in png svg; do
    [[ -s "$dir/train_fig/$name.$ext" ]] || { echo "missing $name.$ext"; ls "$dir/train_fig"; exit 1; }
  done
done
echo "plot_test: all figures written"
