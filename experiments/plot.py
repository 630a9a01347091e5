#!/usr/bin/env python3
"""Plots results files written by `testbed local --out` / `testbed run --out`.

    plot.py results.jsonl [more.jsonl ...] --out DIR

For each number of workers N it writes, as PNG and SVG:
  time_nN      time per collective (time_us_avg) vs message size, log-log
  busbw_nN     bus bandwidth (busbw_gbps) vs message size
  traffic_nN   bytes per collective at the largest size: payload (measured),
               theory (closed form) and wire (interface counters), where present
  model_nN     measured time (solid) against the cost model's prediction
               (model_time_us, dashed), where the run had a link rate
and, when the files hold more than one N:
  time_vs_n    time per algorithm against N at the largest size measured for
               every N (log-log)
  busbw_vs_n   bus bandwidth per algorithm against N at that size (where each
               algorithm stops using the links as N grows: simulated sweeps)
  time_vs_n_SIZE, busbw_vs_n_SIZE
               the same at each smaller size every N was measured at (where
               the latency terms, not the links, pick the winner)
and, from `testbed train --out` rows (proto/training.proto):
  train_accuracy   test accuracy against training time, one line per run
  train_step_vs_n  mean step time against N, one line per scheme (sweeps over N)
  train_step_time  each run's mean step time: compute, exposed and hidden
                   communication
One line or bar group per (algorithm, transport), ps also per number of
servers k; when several files are given, the file name is added to the label. Needs python3-matplotlib.
"""
import argparse
import json
import os
import sys
from collections import defaultdict

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot.py needs matplotlib: apt-get install python3-matplotlib")

# Algorithms in the order the rows first name them: the harness writes rows
# in its registry's order (testbed local --help lists it), so the plots follow
# the tables without a list of names kept here.
ORDER = []


def read_rows(paths):
    rows = []
    for path in paths:
        label = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    print(f"{path}:{number}: skipped, not JSON ({e})", file=sys.stderr)
                    continue
                if record.get("record", "result") != "result":
                    continue
                if not all(isinstance(record.get(k), (int, float)) for k in ("workers", "bytes")):
                    continue
                if "algorithm" not in record:
                    continue
                record["_file"] = label
                series = "auto" if record.get("chosen_by") else record["algorithm"]
                if series not in ORDER:
                    ORDER.append(series)
                # What the network carried for the payload: all-reduce bytes
                # leave one worker for another (sent); parameter-server rows
                # (those with shards) push out of the workers and pull into
                # them (sent + received).
                sent = record.get("wire_bytes_sent_total")
                received = record.get("wire_bytes_received_total")
                if isinstance(sent, (int, float)) and isinstance(received, (int, float)):
                    record["_wire"] = sent + received if record.get("servers", 0) > 0 else sent
                rows.append(record)
    return rows


def read_training_rows(paths):
    """TrainingRow lines of `testbed train --out`; int64 fields arrive as strings."""
    rows = []
    for path in paths:
        label = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(record, dict) or record.get("kind") not in ("PROGRESS", "RUN"):
                    continue
                if "sync" not in record:
                    continue
                for field in ("workers", "step", "bucket_bytes", "parameters"):
                    record[field] = int(record.get(field, 0))
                record["_file"] = label
                rows.append(record)
    return rows


def training_scheme_name(row):
    """The spec's scheme name, or the sync with its options and PS mode."""
    if row.get("scheme"):
        name = row["scheme"]
    else:
        name = row["sync"]
        if row.get("servers") and row["sync"] == "ps":
            name += f" S={row['servers']}"
        if row.get("compress", "none") != "none":
            name += f" {row['compress']}"
        if row.get("bucket_bytes") and int(row["bucket_bytes"]):
            name += f" bucket {size_label(int(row['bucket_bytes']))}"
        if row.get("overlap"):
            name += " overlap"
    if row.get("ps_mode") and row["ps_mode"] != "sync":
        name += f" {row['ps_mode']}"
    return name


def training_setting(row):
    """What a run trained and over which link: the model, the link rate."""
    setting = row["model"] if row.get("model") else f"{row['parameters']} params"
    if row.get("link_rate"):
        setting += f", {row['link_rate']}"
    return setting


def training_scheme(row, many_files):
    """What a training run compared, less N: scheme, model, link (and file)."""
    name = f"{training_scheme_name(row)}, {training_setting(row)}"
    return name + (f" [{row['_file']}]" if many_files else "")


def training_key(row, many_files):
    return f"{training_scheme(row, many_files)}, N={row['workers']}"


def training_accuracy_plot(rows, many_files, out_dir, name):
    series = defaultdict(list)
    for r in rows:
        if r["kind"] == "PROGRESS":
            series[training_key(r, many_files)].append(
                (r.get("training_seconds", 0), 100 * r.get("test_accuracy", 0)))
    if not series:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in sorted(series):
        xs, ys = zip(*sorted(series[key]))
        ax.plot(xs, ys, marker="o", markersize=4, label=key)
    ax.set_xlabel("training time (s, worker 0's steps; evaluation excluded)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Test accuracy against time, per synchronisation scheme")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, out_dir, name)


def training_step_plot(rows, many_files, out_dir, name):
    runs = {training_key(r, many_files): r for r in rows if r["kind"] == "RUN"}
    if not runs:
        return
    keys = sorted(runs)
    parts = [("compute", "compute_seconds"), ("exposed communication", "communication_seconds"),
             ("hidden communication", "overlapped_communication_seconds")]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(keys) + 2), 4.5))
    width = 0.8 / len(parts)
    for i, (label, field) in enumerate(parts):
        xs = [j + (i - (len(parts) - 1) / 2) * width for j in range(len(keys))]
        ax.bar(xs, [1e3 * runs[k].get(field, 0) for k in keys], width, label=label)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(keys, fontsize="x-small", rotation=20, ha="right")
    ax.set_ylabel("mean per step (ms)")
    ax.set_title("Step time: compute, then exposed communication (hidden ran during compute)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, out_dir, name)


def training_step_vs_n_plot(rows, many_files, out_dir, name):
    """Mean step time of each run's last reporting interval (its steady state,
    as testbed report's table) against N: one panel per model and link, one
    line per scheme (training_tradeoffs)."""
    panels = defaultdict(lambda: defaultdict(dict))
    last_step = {}
    for r in rows:
        if r["kind"] != "PROGRESS":
            continue
        line = training_scheme_name(r) + (f" [{r['_file']}]" if many_files else "")
        key = (training_setting(r), line, int(r["workers"]))
        if r["step"] >= last_step.get(key, -1):
            last_step[key] = r["step"]
            panels[key[0]][line][key[2]] = 1e3 * r.get("step_seconds", 0)
    panels = {setting: {k: v for k, v in lines.items() if len(v) > 1}
              for setting, lines in panels.items()}
    panels = {setting: lines for setting, lines in panels.items() if lines}
    if not panels:
        return
    columns = min(2, len(panels))
    rows_of_panels = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows_of_panels, columns, squeeze=False,
                             figsize=(6 * columns, 4 * rows_of_panels))
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, setting in zip(axes.flat, sorted(panels)):
        for key in sorted(panels[setting]):
            ns = sorted(panels[setting][key])
            ax.plot(ns, [panels[setting][key][n] for n in ns], marker="o", markersize=4, label=key)
        ax.set_title(setting, fontsize="medium")
        ax.set_xlabel("workers N")
        ax.set_ylabel("mean step time, last interval (ms)")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    fig.suptitle("Training step time against N, per scheme")
    fig.tight_layout()
    save(fig, out_dir, name)


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


def series_key(row, many_files):
    # Rows that --algorithms auto chose are their own series, beside the
    # algorithms it chose among.
    algorithm = "auto" if row.get("chosen_by") else row["algorithm"]
    if algorithm == "ps" and row.get("servers"):
        algorithm += f" k={row['servers']}"
    name = f"{algorithm} ({row.get('transport') or '-'})"
    return name + (f" [{row['_file']}]" if many_files else "")


def sort_key(key):
    algorithm, _, rest = key.partition(" ")
    # ps k=8 before ps k=64: servers by number, not by text.
    servers = int(rest[2:].split(" ")[0]) if rest.startswith("k=") else 0
    return (ORDER.index(algorithm) if algorithm in ORDER else len(ORDER), servers, key)


def save(fig, out_dir, name):
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out_dir, f"{name}.{ext}"), dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(os.path.join(out_dir, name + ".{png,svg}"))


def line_plot(series, field, ylabel, title, logy, out_dir, name):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for key in sorted(series, key=sort_key):
        points = sorted((r["bytes"], r[field]) for r in series[key]
                        if isinstance(r.get(field), (int, float)) and r["bytes"] > 0)
        if logy:
            points = [p for p in points if p[1] > 0]
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", markersize=4, label=key)
        drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ticks = sorted({r["bytes"] for rows in series.values() for r in rows if r["bytes"] > 0})
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks], rotation=45)
    ax.set_xlabel("message size per worker")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, out_dir, name)


def traffic_plot(series, n, out_dir, name):
    keys = sorted(series, key=sort_key)
    largest = [max(series[k], key=lambda r: r["bytes"]) for k in keys]
    kinds = [("payload", "payload_bytes_total"), ("theory", "theory_bytes_total"),
             ("wire", "_wire")]
    # A kind is drawn when some row has it (wire counters are 0 where not measured).
    kinds = [(label, field) for label, field in kinds
             if any(isinstance(r.get(field), (int, float)) and r[field] > 0 for r in largest)]
    if not kinds:
        return
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(keys) + 2), 4.5))
    width = 0.8 / len(kinds)
    for i, (label, field) in enumerate(kinds):
        xs = [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(keys))]
        ys = [r.get(field) if isinstance(r.get(field), (int, float)) else 0 for r in largest]
        ax.bar(xs, [y / 2**20 for y in ys], width, label=label)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{k}\nM={size_label(r['bytes'])}" for k, r in zip(keys, largest)],
                       fontsize="small")
    ax.set_ylabel("bytes per collective, all ranks (MiB)")
    ax.set_title(f"Traffic per algorithm, N={n}, largest size")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, out_dir, name)


def model_plot(series, n, out_dir, name):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for key in sorted(series, key=sort_key):
        points = sorted((r["bytes"], r["time_us_avg"], r["model_time_us"]) for r in series[key]
                        if isinstance(r.get("model_time_us"), (int, float))
                        and r["model_time_us"] > 0 and r["bytes"] > 0)
        if not points:
            continue
        xs, measured, predicted = zip(*points)
        line, = ax.plot(xs, measured, marker="o", markersize=4, label=f"{key} measured")
        ax.plot(xs, predicted, linestyle="--", color=line.get_color(), label=f"{key} model")
        drawn = True
    if not drawn:
        plt.close(fig)
        return
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted({r["bytes"] for rows in series.values() for r in rows if r["bytes"] > 0})
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks], rotation=45)
    ax.set_xlabel("message size per worker")
    ax.set_ylabel("time per collective (µs)")
    ax.set_title(f"Measured (solid) vs alpha-beta model (dashed), N={n}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="x-small", ncol=2)
    save(fig, out_dir, name)


def common_sizes(rows):
    """The sizes every N was measured at, largest first."""
    workers = sorted({int(r["workers"]) for r in rows})
    if len(workers) < 2:
        return []
    common = set.intersection(*({r["bytes"] for r in rows if int(r["workers"]) == n}
                                for n in workers))
    return sorted(common, reverse=True)


def vs_n_plot(rows, size, many_files, field, ylabel, logy, out_dir, name):
    workers = sorted({int(r["workers"]) for r in rows})
    series = defaultdict(list)
    for r in rows:
        if r["bytes"] == size:
            series[series_key(r, many_files)].append((int(r["workers"]), r.get(field, 0)))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key in sorted(series, key=sort_key):
        xs, ys = zip(*sorted(series[key]))
        ax.plot(xs, ys, marker="o", markersize=4, label=key)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xticks(workers)
    ax.set_xticklabels([str(n) for n in workers])
    ax.set_xlabel("workers N")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{ylabel.split(' (')[0].capitalize()} vs N at M={size_label(size)}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, out_dir, name)


def vs_n_plots(rows, many_files, out_dir):
    # The largest common size keeps the plain names; each smaller one is named
    # by its size.
    for i, size in enumerate(common_sizes(rows)):
        suffix = "" if i == 0 else f"_{size_label(size)}"
        vs_n_plot(rows, size, many_files, "time_us_avg", "time per collective (µs)", True,
                  out_dir, "time_vs_n" + suffix)
        vs_n_plot(rows, size, many_files, "busbw_gbps", "bus bandwidth (GB/s, algbw·2(N−1)/N)",
                  False, out_dir, "busbw_vs_n" + suffix)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="results files (JSON lines)")
    parser.add_argument("--out", required=True, help="directory for the PNG and SVG files")
    args = parser.parse_args()

    rows = read_rows(args.files)
    training = read_training_rows(args.files)
    if not rows and not training:
        sys.exit("no result or training records in " + ", ".join(args.files))
    os.makedirs(args.out, exist_ok=True)
    many_files = len(args.files) > 1
    training_accuracy_plot(training, many_files, args.out, "train_accuracy")
    training_step_plot(training, many_files, args.out, "train_step_time")
    training_step_vs_n_plot(training, many_files, args.out, "train_step_vs_n")
    by_workers = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_workers[int(row["workers"])][series_key(row, many_files)].append(row)

    for n, series in sorted(by_workers.items()):
        line_plot(series, "time_us_avg", "time per all-reduce (µs)",
                  f"Time vs message size, N={n}", True, args.out, f"time_n{n}")
        line_plot(series, "busbw_gbps", "bus bandwidth (GB/s, algbw·2(N−1)/N)",
                  f"Bus bandwidth vs message size, N={n}", False, args.out, f"busbw_n{n}")
        traffic_plot(series, n, args.out, f"traffic_n{n}")
        model_plot(series, n, args.out, f"model_n{n}")
    vs_n_plots(rows, many_files, args.out)


if __name__ == "__main__":
    main()
