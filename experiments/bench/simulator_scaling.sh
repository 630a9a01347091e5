#!/usr/bin/env bash
# The scaling figure (docs/simulator.md, "Scale"): every all-reduce, and ps
# with k = 1, 8 and 64 dedicated shards on the spine, simulated at N = 16 ..
# 4,096 on racks of 8 hosts at 1 Gbit/s behind 4:1 uplinks (a rack's 8 Gbit/s
# over a 2 Gbit/s uplink), alpha 50 us a message, at 64 KiB and 64 MiB. The
# simulator is deterministic, so the rows are the figure's data: they go to
# OUT_DIR/simulator_scaling.jsonl (with its course table .md), the fastest
# algorithm per N and size to OUT_DIR/simulator_scaling_winners.md, and the
# plots (time and busbw against N, one per size) beside them when matplotlib
# is there. About 5 minutes on 2 cores (4 min 54 s here), 2.9 GB at the most
# (naive at 4,096).
#
# usage: experiments/bench/simulator_scaling.sh [BUILD_DIR] [OUT_DIR]
#        (default: build experiments/reference)
set -euo pipefail
build=${1:-build}
out=${2:-experiments/reference}
testbed=$build/experiments/testbed
[[ -x $testbed ]] || { echo "simulator_scaling: $testbed not built (./.ci/build)" >&2; exit 2; }
mkdir -p "$out"
rows=$out/simulator_scaling.jsonl
rm -f "$rows" "${rows%.jsonl}.md"
echo "simulator_scaling: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for n in 16 32 64 128 256 512 1024 2048 4096; do
  fabric=(--link-rate 1gbit -n "$n" --racks $(( n / 8 )) --oversubscription 4 -s 64KiB,64MiB)
  "$testbed" simulate "${fabric[@]}" --name scaling \
    -a naive,ring,tree,butterfly,halving-doubling,hierarchical --out "$rows" --format csv \
    > /dev/null
  for k in 1 8 64; do
    (( k <= n )) || continue
    "$testbed" simulate "${fabric[@]}" --name scaling -a ps --servers "$k" \
      --server-placement spine --out "$rows" --format csv > /dev/null
  done
  echo "simulator_scaling: N = $n done" >&2
done
python=/usr/bin/python3
"$python" - "$rows" > "$out/simulator_scaling_winners.md" <<'PYEOF'
import json, sys
from collections import defaultdict
times = defaultdict(dict)  # (bytes, N) -> series -> seconds
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row.get("record") != "result":
        continue
    name = row["algorithm"] + (f" k={row['servers']}" if row["algorithm"] == "ps" else "")
    times[(int(row["bytes"]), int(row["workers"]))][name] = row["time_us_p50"] / 1e6
series = ["naive", "ring", "tree", "butterfly", "halving-doubling", "hierarchical",
          "ps k=1", "ps k=8", "ps k=64"]
print("# Simulated time per all-reduce against N (experiments/bench/simulator_scaling.sh)\n")
print("Racks of 8 hosts at 1 Gbit/s behind 4:1 uplinks, alpha 50 us; seconds; the fastest in bold.\n")
for size in sorted({s for s, _ in times}):
    label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
    print(f"## {label}\n")
    print("| N | " + " | ".join(series) + " | fastest |")
    print("|---:|" + "---:|" * len(series) + "---|")
    for n in sorted(n for s, n in times if s == size):
        got = times[(size, n)]
        best = min(got, key=got.get)
        cells = [("**%.4g**" if name == best else "%.4g") % got[name] if name in got else "-"
                 for name in series]
        print(f"| {n} | " + " | ".join(cells) + f" | {best} |")
    print()
PYEOF
if "$python" -c 'import matplotlib' 2>/dev/null; then
  plots=$(mktemp -d)
  trap 'rm -rf "$plots"' EXIT
  "$python" experiments/plot.py "$rows" --out "$plots" > /dev/null
  for plot in "$plots"/*_vs_n*.png; do cp "$plot" "$out/simulator_scaling_$(basename "$plot")"; done
fi
echo "simulator_scaling: wrote $rows, $out/simulator_scaling_winners.md" >&2
