"""Writes BENCHMARKS.md and the plots from a results file of benches/bench.py.

Usage: report.py RESULTS.json --out BENCHMARKS.md --plots benches/plots

Every number in the report comes from the results file; the hand-written analysis in
benches/analysis.md is appended as is.
"""

import argparse
import json
import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINES = ["eqdv", "no_pruning", "floor", "duckdb"]
NAMES = {
    "eqdv": "eqdv",
    "no_pruning": "(a) no pruning",
    "duckdb": "(b) DuckDB",
    "floor": "(c) floor",
}
READERS = {
    "iceberg_rust_eq": "iceberg-rust 0.10.1 scan, equality deletes",
    "iceberg_rust_dv": "iceberg-rust 0.10.1 scan, DVs",
    "pyiceberg_eq": "PyIceberg 0.12.0, equality deletes",
    "pyiceberg_dv": "PyIceberg 0.12.0, DVs",
    "eqdv_eq": "eqdv::read (reference reader), equality deletes",
    "eqdv_dv": "eqdv::read (reference reader), DVs",
    "java_eq": "Java IcebergGenerics 1.12.0, equality deletes",
    "java_dv": "Java IcebergGenerics 1.12.0, DVs",
}
IN_LIST = 200  # #18003 uses IN lists up to 200 values, ranges beyond
# The memory target's fixed overhead (see benches/analysis.md): runtime, metadata and
# manifests, parallelism x decoded key-column buffers, the positions and the Puffin file.
OVERHEAD_MB = 256


def median_run(runs):
    ok = [r for r in runs if "out" in r]
    if not ok:
        return None
    ok.sort(key=lambda r: r["wall_s"])
    return ok[(len(ok) - 1) // 2]


def fmt_s(x):
    if x is None:
        return "–"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_n(x):
    if x is None:
        return "–"
    x = float(x)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.0f}"


def fmt_mb(x):
    return "–" if x is None else f"{x:.0f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_r(x):
    return "–" if x is None else f"{x:.2f}x"


def fmt_phases(p):
    if not p:
        return "–"
    return f"{p['read_table_ms']:.0f} / {p['resolve_ms']:.0f} / {p['write_commit_ms']:.0f}"


def opened(run, name):
    if run is None:
        return None
    out = run["out"]
    if name in ("eqdv", "no_pruning"):
        return out["resolve"]["files_opened"]
    if name == "floor":
        return out["files_opened"]
    return None


def summarise(s):
    """Per-scenario medians and ratios."""
    m = {name: median_run(s["runs"][name]) for name in BASELINES}
    e = m["eqdv"]
    row = {
        "layout": s["layout"],
        "dist": s["dist"],
        "keys": s["keys"],
        "truth": s["truth_files"],
        "data_files": s["data_files"],
        "m": m,
        "wall": {k: (v["wall_s"] if v else None) for k, v in m.items()},
        "opened": {k: opened(v, k) for k, v in m.items()},
    }
    row["opened_ratio"] = ratio(row["opened"]["eqdv"], row["truth"])
    row["floor_ratio"] = ratio(row["wall"]["eqdv"], row["wall"]["floor"])
    row["duckdb_ratio"] = ratio(row["wall"]["eqdv"], row["wall"]["duckdb"])
    row["nopruning_ratio"] = ratio(row["wall"]["no_pruning"], row["wall"]["eqdv"])
    cpu = {k: (v["cpu_s"] if v else None) for k, v in m.items()}
    row["floor_cpu_ratio"] = ratio(cpu["eqdv"], cpu["floor"])
    # Like for like: eqdv's resolve phase (keys read, files pruned, key columns decoded and
    # probed) against the floor's time inside its process (the same work, minus pruning).
    phases = e["out"].get("phases") if e else None
    row["phases"] = phases
    floor_inner = m["floor"]["out"].get("inner_ms") if m["floor"] else None
    row["resolve_floor_ratio"] = ratio(phases["resolve_ms"], floor_inner) if phases else None
    row["duckdb_cpu_ratio"] = ratio(cpu["eqdv"], cpu["duckdb"])
    # Like for like against DuckDB too: both times taken inside the process, so neither
    # the interpreter's start-up and imports (DuckDB's driver is Python) nor eqdv's
    # process start-up count; what they cost is reported apart.
    inner = {k: (v["out"].get("inner_ms") if v and "out" in v else None) for k, v in m.items()}
    row["inner_ms"] = inner
    row["duckdb_inner_ratio"] = ratio(inner["eqdv"], inner["duckdb"])
    row["startup_s"] = {
        k: (row["wall"][k] - inner[k] / 1000.0 if row["wall"][k] is not None and inner[k] is not None else None)
        for k in ("eqdv", "duckdb")
    }
    # Correctness: every baseline found the same positions.
    found = {}
    if e:
        found["eqdv"] = e["out"]["positions_added"]
    if m["no_pruning"]:
        found["no_pruning"] = m["no_pruning"]["out"]["positions_added"]
    if m["floor"]:
        found["floor"] = m["floor"]["out"]["positions"]
    if m["duckdb"]:
        found["duckdb"] = m["duckdb"]["out"]["positions"]
    # DuckDB given the data files eqdv's pruning leaves to open (results since the
    # candidate runs were added; older ones have none).
    cand = median_run(s["runs"].get("duckdb_candidates", []))
    row["duckdb_candidates"] = cand
    row["candidates"] = s.get("candidates")
    cand_inner = cand["out"].get("inner_ms") if cand else None
    row["duckdb_cand_inner_ms"] = cand_inner
    row["duckdb_cand_inner_ratio"] = ratio(inner["eqdv"], cand_inner)
    if cand:
        found["duckdb_candidates"] = cand["out"]["positions"]
    row["positions"] = found
    row["positions_agree"] = len(set(found.values())) == 1 and s["deleted_rows"] in found.values()
    return row


def layouts_rerun(results):
    """Layouts measured in this run of a merged results file (their entries come last)."""
    return {s["layout"] for s in results["scenarios"] if "reads_from" in s} | {
        s["layout"] for s in results["scenarios"][-1:]
    }


def layout_title(name, layout, markdown=False):
    part = "unpartitioned" if layout["buckets"] == 0 else f"bucket[{layout['buckets']}](k)"
    if markdown and layout["buckets"]:
        part = f"`{part}`"  # bare, Markdown would read it as a link to "k"
    return (
        f"{name}: {layout['files']:,} data files x {layout['rows_per_file']:,} rows, "
        f"{layout['key']} keys, {part} ({layout['data_bytes'] / 1e6:,.0f} MB of Parquet)"
    )


def scenario_table(rows):
    head = (
        "| keys | dist | files holding a key | opened: eqdv | (a) no pruning | (c) floor "
        "| wall s: eqdv | (a) | (b) DuckDB | (c) floor | eqdv / floor | eqdv / DuckDB "
        "| in-process: eqdv / DuckDB | by CPU time: eqdv / floor | eqdv / DuckDB "
        "| eqdv ms: read table / resolve / write + commit | resolve / floor (in-process) "
        "| eqdv CPU s | eqdv peak RSS MB | eqdv bytes read | eqdv rows scanned | keys/s | positions agree |\n"
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n"
    )
    out = [head]
    for r in rows:
        e = r["m"]["eqdv"]
        res = e["out"]["resolve"] if e else {}
        out.append(
            f"| {r['keys']:,} | {r['dist']} | {r['truth']:,} | {fmt_n(r['opened']['eqdv'])} "
            f"| {fmt_n(r['opened']['no_pruning'])} | {fmt_n(r['opened']['floor'])} "
            f"| {fmt_s(r['wall']['eqdv'])} | {fmt_s(r['wall']['no_pruning'])} "
            f"| {fmt_s(r['wall']['duckdb'])} | {fmt_s(r['wall']['floor'])} "
            f"| {fmt_r(r['floor_ratio'])} | {fmt_r(r['duckdb_ratio'])} | {fmt_r(r['duckdb_inner_ratio'])} "
            f"| {fmt_r(r['floor_cpu_ratio'])} | {fmt_r(r['duckdb_cpu_ratio'])} "
            f"| {fmt_phases(r['phases'])} | {fmt_r(r['resolve_floor_ratio'])} "
            f"| {fmt_s(e['cpu_s'] if e else None)} | {fmt_mb(e['max_rss_mb'] if e else None)} "
            f"| {fmt_n(res.get('bytes_read'))} | {fmt_n(res.get('rows_scanned'))} "
            f"| {fmt_n(r['keys'] / r['wall']['eqdv'] if e else None)} "
            f"| {'yes' if r['positions_agree'] else 'NO ' + json.dumps(r['positions'])} |\n"
        )
    return "".join(out)


def baseline_detail_table(rows):
    head = (
        "| keys | dist | run | wall s | CPU s | peak RSS MB | files opened | bytes read | rows scanned |\n"
        "|---:|---|---|---:|---:|---:|---:|---:|---:|\n"
    )
    out = [head]
    for r in rows:
        for name in BASELINES:
            run = r["m"][name]
            if run is None:
                out.append(f"| {r['keys']:,} | {r['dist']} | {NAMES[name]} | failed | | | | | |\n")
                continue
            o = run["out"]
            if name in ("eqdv", "no_pruning"):
                bytes_read, scanned = o["resolve"]["bytes_read"], o["resolve"]["rows_scanned"]
            elif name == "floor":
                bytes_read, scanned = o["bytes_read"], o["rows_scanned"]
            else:
                bytes_read, scanned = None, None
            out.append(
                f"| {r['keys']:,} | {r['dist']} | {NAMES[name]} | {fmt_s(run['wall_s'])} "
                f"| {fmt_s(run['cpu_s'])} | {fmt_mb(run['max_rss_mb'])} "
                f"| {fmt_n(opened(run, name)) if name != 'duckdb' else 'all ' + fmt_n(r['data_files'])} "
                f"| {fmt_n(bytes_read)} | {fmt_n(scanned)} |\n"
            )
    return "".join(out)


def candidates_table(rows):
    """DuckDB given the files eqdv opens, beside DuckDB on every file and eqdv."""
    head = (
        "| layout | keys | dist | data files | eqdv opens | DuckDB in-process ms: every file "
        "| eqdv's candidates | eqdv in-process ms | eqdv / DuckDB (candidates) | positions agree |\n"
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|\n"
    )
    out = [head]
    for r in rows:
        if r["duckdb_candidates"] is None:
            continue
        c = r["candidates"] or {}
        out.append(
            f"| {r['layout']} | {r['keys']:,} | {r['dist']} | {r['data_files']:,} "
            f"| {fmt_n(c.get('files_opened'))} | {fmt_ms(r['inner_ms']['duckdb'])} "
            f"| {fmt_ms(r['duckdb_cand_inner_ms'])} | {fmt_ms(r['inner_ms']['eqdv'])} "
            f"| {fmt_r(r['duckdb_cand_inner_ratio'])} | {'yes' if r['positions_agree'] else 'NO'} |\n"
        )
    return "".join(out)


def fmt_ms(x):
    return "–" if x is None else f"{x:,.0f}"


def plot_times(layout, rows, path):
    dists = ["hot", "scattered", "mixed"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, dist in zip(axes, dists):
        sel = sorted((r for r in rows if r["dist"] == dist), key=lambda r: r["keys"])
        for name, style in zip(BASELINES, ["o-", "s--", "^:", "d-."]):
            xs = [r["keys"] for r in sel if r["wall"][name] is not None]
            ys = [r["wall"][name] for r in sel if r["wall"][name] is not None]
            ax.plot(xs, ys, style, label=NAMES[name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(dist.upper())
        ax.set_xlabel("deleted keys")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("wall time, s (one process per run)")
    axes[0].legend()
    fig.suptitle(f"Time vs deleted keys: {layout}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_opened(rows, path):
    fig, ax = plt.subplots(figsize=(6.5, 6))
    markers = {"hot": "o", "scattered": "s", "mixed": "^"}
    for dist, marker in markers.items():
        sel = [r for r in rows if r["dist"] == dist and r["opened"]["eqdv"] is not None]
        ax.scatter([r["truth"] for r in sel], [r["opened"]["eqdv"] for r in sel],
                   marker=marker, label=f"eqdv, {dist}", zorder=3)
    sel = [r for r in rows if r["opened"]["no_pruning"] is not None]
    ax.scatter([r["truth"] for r in sel], [r["opened"]["no_pruning"] for r in sel],
               marker="x", color="grey", label="(a) no pruning", zorder=2)
    hi = max([r["data_files"] for r in rows] + [10])
    xs = [1, hi]
    ax.plot(xs, xs, "k-", lw=0.8, label="= files holding a key")
    ax.plot(xs, [1.1 * x for x in xs], "k--", lw=0.6, label="1.1x")
    ax.plot(xs, [2 * x for x in xs], "k:", lw=0.6, label="2x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("data files that truly hold a deleted key")
    ax.set_ylabel("data files opened")
    ax.set_title("Files opened vs files holding a key (all scenarios)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_reads(read_rows, path):
    if not read_rows:
        return False
    labels = [f"{r['layout']}\n{r['dist']} {r['keys']:,}" for r in read_rows]
    def usable(run):
        return run and (run.get("timeout_s") or (run.get("out") and "error" not in run["out"]))

    kinds = [k for k in READERS if any(usable(r["reads"].get(k)) for r in read_rows)]
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(labels) * max(1, len(kinds)) / 3), 4.5))
    width = 0.8 / max(1, len(kinds))
    for i, kind in enumerate(kinds):
        ys, hatches = [], []
        for r in read_rows:
            run = r["reads"].get(kind)
            ys.append(run["wall_s"] if usable(run) else 0)
            hatches.append("//" if run and run.get("timeout_s") else "")
        bars = ax.bar([x + i * width for x in range(len(labels))], ys, width, label=READERS[kind])
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
    ax.set_xticks([x + width * (len(kinds) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("wall time to read the whole table, s\n(hatched: killed at the timeout)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.set_title("Reading with equality deletes vs with DVs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def read_ok(run, expected_rows, expected_sum):
    if not run or "out" not in run or "error" in run["out"]:
        return None
    return int(run["out"]["rows"]) == expected_rows and int(run["out"]["sum_v"]) == expected_sum


def reads_section(results):
    lines = []
    read_rows = [s for s in results["scenarios"] if s.get("reads")]
    if not read_rows:
        return "", [], []
    lines.append(
        "| table | scenario | reader | wall s | CPU s | peak RSS MB | rows | same rows as expected |\n"
        "|---|---|---|---:|---:|---:|---:|---|\n"
    )
    speedups = []
    for s in read_rows:
        for kind, label in READERS.items():
            run = s["reads"].get(kind)
            if not run:
                continue
            if run.get("timeout_s"):
                lines.append(
                    f"| {s['layout']} | {s['dist']} {s['keys']:,} | {label} | > {run['timeout_s']:.0f} "
                    f"(killed) | {fmt_s(run['cpu_s'])} | {fmt_mb(run['max_rss_mb'])} | – | – |\n"
                )
            elif "out" in run and "error" not in run["out"]:
                ok = read_ok(run, s["expected_rows"], s["expected_sum_v"])
                lines.append(
                    f"| {s['layout']} | {s['dist']} {s['keys']:,} | {label} | {fmt_s(run['wall_s'])} "
                    f"| {fmt_s(run['cpu_s'])} | {fmt_mb(run['max_rss_mb'])} | {run['out']['rows']:,} "
                    f"| {'yes' if ok else 'NO'} |\n"
                )
            else:
                err = run.get("error") or run["out"].get("error", "")
                errlines = [e.strip() for e in err.strip().splitlines() if e.strip()]
                err = next((e for e in errlines if e.startswith("Error")), errlines[0] if errlines else "failed")
                lines.append(
                    f"| {s['layout']} | {s['dist']} {s['keys']:,} | {label} | cannot read: "
                    f"`{err[:140].replace('|', '/')}` | | | | |\n"
                )

        def wall(kind):
            """(seconds, is a lower bound): a reader that timed out took at least that."""
            run = s["reads"].get(kind)
            if run and run.get("timeout_s"):
                return (run["wall_s"], True)
            if run and "out" in run and "error" not in run["out"] and read_ok(run, s["expected_rows"], s["expected_sum_v"]):
                return (run["wall_s"], False)
            return None

        def speedup(eq, dv):
            eq, dv = wall(eq), wall(dv)
            if eq is None or dv is None or dv[1]:
                return None
            return (eq[0] / dv[0], eq[1])

        speedups.append({
            "layout": s["layout"], "dist": s["dist"], "keys": s["keys"],
            "cross": speedup("iceberg_rust_eq", "pyiceberg_dv"),
            "eqdv": speedup("eqdv_eq", "eqdv_dv"),
            "java": speedup("java_eq", "java_dv"),
        })
    return "".join(lines), speedups, read_rows


def eqdv_parallelism(rows):
    """The parallelism eqdv's runs reported (one value, or the distinct ones)."""
    seen = sorted({r["m"]["eqdv"]["out"].get("parallelism") for r in rows if r["m"]["eqdv"]} - {None})
    return "/".join(str(p) for p in seen) or "the default"


def duckdb_version(rows):
    seen = sorted({r["m"]["duckdb"]["out"].get("duckdb") for r in rows if r["m"]["duckdb"]} - {None})
    return "/".join(seen) or "(version not recorded)"


README_BEGIN = "<!-- benchmarks-summary: generated by benches/report.py -->\n"
README_END = "<!-- benchmarks-summary: end -->\n"


def readme_summary(results, rows, speedups):
    """The README's short account of the full run, every figure from the results."""
    layouts = results["layouts"]
    sizes = sorted({(l["files"], l["rows_per_file"]) for l in layouts.values()})
    keys = sorted({r["keys"] for r in rows})
    opened = [r["opened_ratio"] for r in rows if r["opened_ratio"] is not None]
    inner = [r["duckdb_inner_ratio"] for r in rows if r["duckdb_inner_ratio"] is not None]
    walls = [r["duckdb_ratio"] for r in rows if r["duckdb_ratio"] is not None]
    duck_start = [r["startup_s"]["duckdb"] for r in rows if r["startup_s"]["duckdb"] is not None]
    floor = [r["floor_ratio"] for r in rows if r["floor_ratio"] is not None]
    fixed = [
        r["phases"]["read_table_ms"] + r["phases"]["write_commit_ms"]
        for r in rows if r["phases"]
    ]
    parts = [
        f"In short ({results['mode']} run of {results['started']}: "
        + " and ".join(f"{f:,} x {n:,}-row" for f, n in sizes)
        + f" tables, {keys[0]:,} to {keys[-1]:,} deleted keys, {len(rows)} scenarios): "
    ]
    if opened:
        parts.append(f"eqdv opens at most {fmt_r(max(opened))} the files that hold a deleted key; ")
    if inner:
        over = sum(1 for v in inner if v >= 1)
        parts.append(
            f"timed inside each process, its conversion takes {fmt_r(min(inner))}-{fmt_r(max(inner))} of the "
            "time DuckDB takes to find the deleted positions "
            f"({'faster in every scenario' if over == 0 else f'not faster in {over} of {len(inner)} scenarios'}); "
        )
    if walls and duck_start:
        parts.append(
            f"end to end, each its own process, {fmt_r(min(walls))}-{fmt_r(max(walls))} (DuckDB's Python driver "
            f"spends a median {fmt_s(statistics.median(duck_start))} s starting up); "
        )
    if floor:
        parts.append(
            f"its wall time is {fmt_r(min(floor))}-{fmt_r(max(floor))} the floor's "
            f"(a conversion also reads the table and commits: {min(fixed):,.0f}-{max(fixed):,.0f} ms of fixed cost). "
        )
    big = [s for s in speedups if s["keys"] >= 200_000]
    cross = [s["cross"] for s in big if s["cross"]]
    if cross:
        w = min(cross, key=lambda v: v[0])
        parts.append(
            f"With {big[0]['keys']:,} deleted keys, reading the DVs (PyIceberg) is at least "
            f"{fmt_r(w[0])} faster than iceberg-rust reading the equality deletes on every table"
        )
        java = {}
        for sp in big:
            if sp["java"]:
                java.setdefault(sp["layout"], []).append(sp["java"])
        if java:
            def span(vals):
                lo, hi = min(vals, key=lambda v: v[0]), max(vals, key=lambda v: v[0])
                f = lambda v: f"{'>= ' if v[1] else ''}{fmt_r(v[0])}"  # noqa: E731
                return f(lo) if lo == hi else f"{f(lo)} to {f(hi)}"
            parts.append("; Java's reader gains " + ", ".join(
                f"{span(v)} on {name}" for name, v in sorted(java.items())))
        parts.append(".")
    text = "".join(parts)
    # Wrapped as the README's prose is.
    import textwrap
    return README_BEGIN + textwrap.fill(text, width=88, break_on_hyphens=False) + "\n" + README_END


def splice_readme(path, summary):
    if not os.path.exists(path):
        return
    with open(path) as f:
        text = f.read()
    if README_BEGIN not in text or README_END not in text:
        return
    head, rest = text.split(README_BEGIN, 1)
    with open(path, "w") as f:
        f.write(head + summary + rest.split(README_END, 1)[1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--out", required=True)
    parser.add_argument("--plots", required=True)
    args = parser.parse_args()
    with open(args.results) as f:
        results = json.load(f)
    os.makedirs(args.plots, exist_ok=True)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    rel = lambda p: os.path.relpath(p, out_dir)  # noqa: E731

    rows = [summarise(s) for s in results["scenarios"]]
    layouts = results["layouts"]
    mach = results["machine"]
    md = []
    md.append("# eqdv benchmarks\n\n")
    md.append(
        f"Generated by `benches/run{' --quick' if results['mode'] == 'quick' else ''}` "
        f"({results['mode']} mode) on {results['started']}, in {results.get('duration_s', 0) / 60:.0f} minutes "
        "(tables reused from the cache when their spec was unchanged). Every number below comes from "
        f"`benches/results/{results['mode']}.json`; `benches/run --report` regenerates this file from it.\n\n"
    )
    if results.get("merged_from"):
        rerun = sorted(layouts_rerun(results))
        every = set(rerun) >= set(results["layouts"])
        md.append(
            f"Merged results: {', '.join(rerun) or 'some tables'} (and the memory run) were re-run on "
            f"{results['started']} with `benches/run --only=... --keep-reads` after an engine change"
            + (" (every table)" if every else f"; the other tables come from the full run of {results['merged_from']}")
            + f". Reader runs of re-run tables were kept from the run of {results['merged_from']} "
            "(they read the same snapshots' contents; the engine change affects only conversions).\n\n"
        )
    md.append(
        f"**Machine**: {mach.get('cpu', '?')}, {mach.get('cpus')} cores, {mach.get('mem_gib')} GiB, "
        f"{mach.get('platform')}. Load average {mach['loadavg_start'][0]:.1f} at the start and "
        f"{mach.get('loadavg_end', [0])[0]:.1f} at the end (the benchmark itself keeps about one core "
        "busy; above 2, something else was running too). "
        "Everything ran under `nice -n 19`. **Build**: profile `bench-fast` (release: opt-level 3, "
        "but codegen-units 16 and no LTO, to keep the build short), "
        f"{mach.get('rustc', 'Rust 1.9x')}. **Storage**: local disk, "
        "files in the OS page cache (every table was just written or read; nothing is dropped between "
        "runs), so these are CPU-bound numbers; on S3 the IO of opened files dominates and pruning "
        "matters more.\n\n"
    )
    md.append("## How to reproduce\n\n```sh\nbenches/run --quick   # about 10 minutes: the 2,000 x 1,000-row table, long keys (rewrites this file)\n"
              "benches/run           # the full matrix below (about 40 minutes on this machine, Java reads included)\n"
              "benches/run --report  # rewrite this file from benches/results/*.json\n"
              "benches/s3_latency   # the S3 latency section: Glue + MinIO behind Toxiproxy, against a baseline\n"
              "benches/key_memory.py  # the memory per deleted long key section (see its header)\n"
              "benches/big_table    # the million-file table section, against a baseline\n"
              "benches/streaming_day  # the streaming day section: converted after every commit, through S3 latency\n"
              "benches/random_keys  # the random keys section: UUIDs and hashed ids, with and without bloom filters\n```\n\n")
    md.append(
        "## What is measured\n\n"
        "Every measured thing is its own process; the driver (`benches/bench.py`) takes wall time, "
        "CPU time (user + system) and peak RSS from `wait4`. Each scenario's runs go side by side, on "
        "the same files, in the same run of the driver. Where a scenario ran several times the table "
        "shows the run with the median wall time.\n\n"
        "- **eqdv**: `eqdv::convert` end to end, as `eqdv convert` runs it: load the table, plan, read "
        "the equality deletes, prune by manifest bounds and row-group statistics, read the key columns "
        f"of the survivors (parallelism {eqdv_parallelism(rows)} on {mach['cpus']} cores), write one Puffin file with the DVs, commit the "
        "snapshot. Between runs the catalog pointer is reset to the state with equality deletes.\n"
        "- **(a) no pruning**: the same conversion with bound and row-group pruning off: every "
        "candidate's key column is read (the baseline of Iceberg PR #18003).\n"
        f"- **(b) DuckDB** {duckdb_version(rows)} (2 threads): `read_parquet(all data files, filename, file_row_number) "
        "SEMI JOIN read_parquet(equality delete files) ON k`, materialised to Arrow: the (file, "
        "position) pairs a DV writer needs, not the DVs themselves (no Puffin, no commit), so it is "
        "favoured. It reads every data file; DuckDB's own join-filter pushdown uses the key range "
        "of the delete side to skip row groups. Its driver is Python: the process's wall time includes "
        "the interpreter's start-up and the imports, so the target compares the time each takes inside "
        "its process (`inner_ms`: DuckDB's connect, query and result; eqdv's whole conversion), with the "
        "end-to-end times and the start-up stated apart.\n"
        "- **(c) floor**: read the equality delete keys into a `HashSet<i64>` / `HashSet<Box<str>>` "
        "(with eqdv's key hasher), then decode only the key column of the data files that truly "
        "hold a deleted key (known from the generator) and probe every value into a bitmap per "
        "file, 2 threads. No planning, no manifests, no Puffin, no commit: a lower bound on the "
        "IO and decoding of any converter that reads Parquet with arrow-rs (not on probing: eqdv's "
        "bit filter for long keys probes faster than this plain set when keys are many).\n"
        "- **files holding a key**: the data files that hold at least one deleted key, computed by "
        "the table builder from its layout. **positions agree**: eqdv, (a), (b) and (c) found the "
        "same number of deleted rows, equal to the number of deleted keys.\n\n"
        "Tables come from the bulk builder in `benches/src/tables.rs` (iceberg-rust 0.10.1's Parquet "
        "writer, zstd, one row group per data file as Java's default 128 MB row groups give for "
        "files this size, eqdv's snapshot code for the commits): row `i` has `k = key(i)` "
        "(long `1e9 + i` or string `ord-%012d`), `v = i` and an 8-character payload; data files are "
        "ingestion batches, so file bounds on `k` are narrow (bucketed: each batch of 16 x 1,000 "
        "rows is split by `bucket[16](k)`, 16 files per batch). Deleted keys: **HOT** = `n` keys "
        "out of a window of `2n` consecutive rows; **SCATTERED** = uniform over the table; "
        "**MIXED** = 90% hot, 10% scattered. Equality deletes are one snapshot after the data "
        "(per bucket for the partitioned tables, at most 1M rows per file).\n\n"
    )

    # Targets.
    def worst(values, key=max):
        vals = [v for v in values if v is not None]
        return key(vals) if vals else None

    in_list = [r for r in rows if r["keys"] <= IN_LIST]
    ranged = [r for r in rows if r["keys"] > IN_LIST]
    w_in = worst(r["opened_ratio"] for r in in_list)
    w_range = worst(r["opened_ratio"] for r in ranged)
    w_floor = worst(r["floor_ratio"] for r in rows)
    w_duck = worst(r["duckdb_ratio"] for r in rows)
    n_floor_miss = sum(1 for r in rows if r["floor_ratio"] and r["floor_ratio"] > 1.5)
    n_duck_miss = sum(1 for r in rows if r["duckdb_ratio"] and r["duckdb_ratio"] >= 1)
    reads_md, speedups, read_rows = reads_section(results)
    def lows(kind):
        return [s[kind] for s in speedups if s["keys"] >= 200_000 and s[kind] is not None]

    cross, eqs, javas = lows("cross"), lows("eqdv"), lows("java")
    mem = results.get("memory")
    md.append("## Targets\n\n| target | measured | met |\n|---|---|---|\n")
    md.append(
        f"| files opened <= 1.1x the files holding a key, keys fit an IN list (<= {IN_LIST}) "
        f"| worst {fmt_r(w_in)} over {len(in_list)} scenarios | {'yes' if w_in is not None and w_in <= 1.1 else 'no'} |\n"
    )
    md.append(
        f"| files opened <= 2x the files holding a key, range regime (> {IN_LIST} keys) "
        f"| worst {fmt_r(w_range)} over {len(ranged)} scenarios | {'yes' if w_range is not None and w_range <= 2 else 'no'} |\n"
    )
    def per_layout(key, limit):
        parts = []
        for name in layouts:
            sel = [r[key] for r in rows if r["layout"] == name and r[key] is not None]
            if sel:
                over = sum(1 for v in sel if v > limit)
                parts.append(f"{name}: worst {fmt_r(max(sel))}, {over}/{len(sel)} over")
        return "; ".join(parts)

    md.append(
        f"| conversion wall time <= 1.5x the floor (c) | worst {fmt_r(w_floor)}; "
        f"{n_floor_miss} of {len(rows)} scenarios above 1.5x ({per_layout('floor_ratio', 1.5)}). "
        f"By CPU time: {per_layout('floor_cpu_ratio', 1.5)} | {'yes' if n_floor_miss == 0 else 'no'} |\n"
    )
    resolve_ratios = [r["resolve_floor_ratio"] for r in rows if r["resolve_floor_ratio"] is not None]
    if resolve_ratios:
        n_over = sum(1 for v in resolve_ratios if v > 1.5)
        md.append(
            f"| (like for like, not the target) eqdv's resolve phase <= 1.5x the floor's in-process time "
            f"| worst {fmt_r(max(resolve_ratios))}; {n_over} of {len(resolve_ratios)} above 1.5x "
            f"({per_layout('resolve_floor_ratio', 1.5)}) | {'yes' if n_over == 0 else 'no'} |\n"
        )
    duck_inner = [r["duckdb_inner_ratio"] for r in rows if r["duckdb_inner_ratio"] is not None]
    n_inner_miss = sum(1 for v in duck_inner if v >= 1)
    duck_start = [r["startup_s"]["duckdb"] for r in rows if r["startup_s"]["duckdb"] is not None]
    eqdv_start = [r["startup_s"]["eqdv"] for r in rows if r["startup_s"]["eqdv"] is not None]
    start_note = (
        f" DuckDB's process spends a median {fmt_s(statistics.median(duck_start))} s outside its query "
        f"(Python's start-up, importing duckdb and pyarrow), eqdv's {statistics.median(eqdv_start) * 1000:,.0f} ms"
        if duck_start and eqdv_start else ""
    )
    md.append(
        f"| faster than DuckDB (b) in every scenario, in-process (each timed inside its own process) "
        f"| worst eqdv/DuckDB {fmt_r(max(duck_inner) if duck_inner else None)}; {n_inner_miss} of {len(duck_inner)} "
        f"scenarios not faster ({per_layout('duckdb_inner_ratio', 0.9999)}). End to end, each its own "
        f"process: worst {fmt_r(w_duck)}, {n_duck_miss} of {len(rows)} not faster.{start_note}. "
        f"By process CPU time: {per_layout('duckdb_cpu_ratio', 0.9999)} "
        f"| {'yes' if duck_inner and n_inner_miss == 0 else 'no'} |\n"
    )
    cand = [r["duckdb_cand_inner_ratio"] for r in rows if r["duckdb_cand_inner_ratio"] is not None]
    if cand:
        n_cand_miss = sum(1 for v in cand if v >= 1)
        md.append(
            f"| (not a target) faster than DuckDB given eqdv's candidate list, in-process (DuckDB reads "
            f"only the data files eqdv's pruning opens; the list is made untimed) "
            f"| worst eqdv/DuckDB {fmt_r(max(cand))}; {n_cand_miss} of {len(cand)} scenarios not faster "
            f"({per_layout('duckdb_cand_inner_ratio', 0.9999)}); see \"DuckDB given eqdv's candidates\" "
            f"| {'yes' if n_cand_miss == 0 else 'no'} |\n"
        )
    if cross or eqs or javas:
        parts = []
        verdicts = []
        for label, vals in (("iceberg-rust (eq) / PyIceberg (DV)", cross),
                            ("eqdv::read eq / DV, same reader", eqs),
                            ("Java eq / DV", javas)):
            if not vals:
                continue
            w = min(vals, key=lambda v: v[0])
            n_met = sum(1 for v in vals if v[0] >= 5)
            parts.append(
                f"{label}: >= 5x in {n_met} of {len(vals)}, worst {'>= ' if w[1] else ''}{fmt_r(w[0])}"
            )
            verdicts.append((w[0] >= 5, n_met > 0))
        met = ("yes" if all(v[0] for v in verdicts)
               else "partly: depends on the reader (see the analysis)" if any(v[1] for v in verdicts)
               else "no")
        md.append(
            f"| reading with DVs >= 5x faster than with equality deletes (200,000-key scenarios) "
            f"| {'; '.join(parts)} | {met} |\n"
        )
    if mem:
        run = mem["runs"][str(mem["budget_mb"])]
        if "out" in run:
            passes = run["out"]["resolve"]["key_passes"]
            md.append(
                f"| {mem['keys']:,} deleted keys under a {mem['budget_mb']:,} MiB budget complete; "
                f"peak RSS under budget + a fixed overhead of {OVERHEAD_MB} MiB "
                f"| completed in {fmt_s(run['wall_s'])} s, {passes} key passes, peak RSS "
                f"{run['max_rss_mb']:,.0f} MB | {'yes' if run['max_rss_mb'] <= mem['budget_mb'] + OVERHEAD_MB else 'no'} |\n"
            )
        else:
            md.append(f"| {mem['keys']:,} keys under {mem['budget_mb']} MiB | failed | no |\n")
    md.append("\n")

    # Per layout.
    md.append("## Conversion: eqdv against the baselines\n\n")
    md.append(
        "Wall times in seconds; ratios are eqdv's wall time over the baseline's (below 1: eqdv is "
        "faster). keys/s = deleted keys resolved per second of eqdv's wall time. Bytes read are "
        "compressed column-chunk bytes (delete files included).\n\n"
    )
    for name, layout in layouts.items():
        sel = [r for r in rows if r["layout"] == name]
        if not sel:
            continue
        md.append(f"### {layout_title(name, layout, markdown=True)}\n\n")
        md.append(f"Table built in {layout.get('build_s', 0):.0f} s. Runs per scenario: "
                  f"{len(results['scenarios'][[s['layout'] for s in results['scenarios']].index(name)]['runs']['eqdv'])}.\n\n")
        md.append(scenario_table(sel))
        plot = os.path.join(args.plots, f"time-vs-keys-{name}.png")
        plot_times(layout_title(name, layout), sel, plot)
        md.append(f"\n![time vs deleted keys, {name}]({rel(plot)})\n\n")
        md.append("<details><summary>Every baseline's CPU time, RSS, files, bytes and rows</summary>\n\n")
        md.append(baseline_detail_table(sel))
        md.append("\n</details>\n\n")

    if any(r["duckdb_candidates"] for r in rows):
        md.append("### DuckDB given eqdv's candidates\n\n")
        md.append(
            "The same join as (b), but DuckDB reads only the data files eqdv's pruning by the "
            "manifests' bounds leaves it to open (`eqdv-bench candidates`, a resolve that commits "
            "nothing, run once per scenario and not timed): what is left between the two is "
            "reading and probing those files, which DuckDB may still narrow by row group with its "
            "own join filter. In-process times, the median run; eqdv's is its whole conversion "
            "(pruning, Puffin file and commit included).\n\n"
        )
        md.append(candidates_table(rows))
        md.append("\n")

    plot = os.path.join(args.plots, "files-opened.png")
    plot_opened(rows, plot)
    md.append("### Files opened vs files holding a key\n\n")
    md.append(f"![files opened vs files holding a key]({rel(plot)})\n\n")

    # Readers.
    if reads_md:
        md.append("## The payoff: reading the table with equality deletes vs with DVs\n\n")
        md.append(
            "The whole table (all columns, streamed; each reader counts rows and sums `v`, which is "
            "unique per row, so equal `rows` and `sum(v)` mean the same rows) at the snapshot with "
            "equality deletes and at eqdv's snapshot with DVs. iceberg-rust 0.10.1 cannot read DVs "
            "and PyIceberg 0.12.0 cannot read equality deletes, so the cross-reader pair is "
            "iceberg-rust (equality deletes) against PyIceberg (DVs). Java's IcebergGenerics (the reference "
            "implementation, through `bench-read` in tests/interop, on the local files with no catalog) "
            "reads both, and so does eqdv's own reference reader (written to be obviously right, not "
            "fast; it holds the table in memory, so it runs on the smaller tables only). Java and "
            "iceberg-rust are killed at a timeout (60 s on the 2M-row tables, 360 s on the 200M-row "
            "one); a killed run's time is a lower bound.\n\n"
        )
        md.append(reads_md)
        md.append("\n| table | scenario | iceberg-rust eq / PyIceberg DV | eqdv::read eq / DV | Java eq / DV |\n|---|---|---:|---:|---:|\n")
        def fr(v):
            return "–" if v is None else f"{'>= ' if v[1] else ''}{fmt_r(v[0])}"

        for s in speedups:
            md.append(f"| {s['layout']} | {s['dist']} {s['keys']:,} | {fr(s['cross'])} | {fr(s['eqdv'])} | {fr(s['java'])} |\n")
        plot = os.path.join(args.plots, "reads.png")
        if plot_reads(read_rows, plot):
            md.append(f"\n![reading with equality deletes vs DVs]({rel(plot)})\n\n")

    # Memory.
    if mem:
        md.append("## Memory: deleted keys beyond the budget\n\n")
        md.append(
            f"{mem['keys']:,} scattered deleted keys on {mem['layout']} ({mem['truth_files']:,} data files hold one). "
            "eqdv's budget counts 15 bytes a key for a single `long` key column (its packed set) and 160 for "
            "any other key; past `--key-memory-mb` the keys are hash-split into passes, "
            "each holding one share of the keys and re-reading the candidates.\n\n"
            "| --key-memory-mb | wall s | CPU s | peak RSS MB | key passes | files opened | positions |\n|---:|---:|---:|---:|---:|---:|---:|\n"
        )
        for mb, run in mem["runs"].items():
            if "out" in run:
                o = run["out"]
                md.append(
                    f"| {int(mb):,} | {fmt_s(run['wall_s'])} | {fmt_s(run['cpu_s'])} | {run['max_rss_mb']:,.0f} "
                    f"| {o['resolve']['key_passes']} | {fmt_n(o['resolve']['files_opened'])} | {o['positions_added']:,} |\n"
                )
            else:
                md.append(f"| {int(mb):,} | failed: {run.get('error', '')[-200:]} | | | | | |\n")
        md.append("\n")

    # The sections of benches/s3_latency, benches/streaming_day, benches/key_memory.py,
    # benches/big_table and benches/split_fanout, kept when the rest of the report is
    # rewritten.
    import report_big_table
    import report_key_memory
    import report_random_keys
    import report_s3_latency
    import report_split_fanout
    import report_streaming_day

    # Runs of benches/streaming_day kept apart with --results=NAME follow its day's.
    days = ["streaming-day.json", "streaming-day-zipf.json"]
    days += sorted(n for n in os.listdir(os.path.join(HERE, "results"))
                   if n.startswith("streaming-day-") and n.endswith(".json") and n not in days)
    for results_name, module in [("s3-latency.json", report_s3_latency),
                                 ("random-keys.json", report_random_keys),
                                 *[(n, report_streaming_day) for n in days],
                                 ("key-memory.json", report_key_memory),
                                 ("big-table.json", report_big_table),
                                 ("split-fanout.json", report_split_fanout)]:
        results_path = os.path.join(HERE, "results", results_name)
        if os.path.exists(results_path):
            with open(results_path) as f:
                md.append(module.section(json.load(f)))
            md.append("\n")

    analysis = os.path.join(HERE, "analysis.md")
    if os.path.exists(analysis):
        with open(analysis) as f:
            md.append(f.read())
    with open(args.out, "w") as f:
        f.write("".join(md))
    # The README's summary tells of the full run only.
    if results["mode"] == "full":
        splice_readme(os.path.join(HERE, "..", "README.md"), readme_summary(results, rows, speedups))


if __name__ == "__main__":
    main()
