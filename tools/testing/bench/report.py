#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turns the guests' BENCH lines into tables, CSVs and gnuplot PNGs.

    report.py OUTDIR            (reads OUTDIR/config.json and OUTDIR/logs/*.log)

Prints the tables on stdout, writes OUTDIR/<experiment>.csv and .png, and
exits 1 when a point the configuration asked for is missing or has a number
that does not parse (never because a number is small).
"""
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

METRICS = ("mbps", "iops", "reqs_per_mib", "blk_reqs_per_mib", "copied_per_mib", "notifs_per_req",
           "reqs", "dom0_notifs_per_req", "cpu_us_per_req", "irqs_per_req", "ctxsw_per_req", "ipis_per_req",
           "memfree_kib", "slab_kib", "sunreclaim_kib", "module_kib", "attach_ms")
LINE = re.compile(r"(BENCH(?:-INFO)?) (exp=\S+(?: \S+=\S*)*)")
# dom0's answer to a guest's mark (tools/testing/xen/blkif-irqs).
DOM0 = re.compile(r"BENCH-DOM0 mark=(\d+) irqs=(\d+)")

out = sys.argv[1]
cfg = json.load(open(os.path.join(out, "config.json")))
problems = []


def num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def dom0_per_req(r, irqs):
    """Backend notifications per request between the record's two marks."""
    a, b, q = irqs.get(r.get("mark0")), irqs.get(r.get("mark1")), num(r.get("reqs"))
    if a is None or b is None or not q:
        return "NA"
    return f"{(b - a) / q:.3f}"


recs, infos = [], []
for log in sorted(glob.glob(os.path.join(out, "logs", "*.log"))):
    irqs, marked = {}, []
    for raw in open(log, errors="replace"):
        line = raw.replace("\r", "")
        d = DOM0.search(line)
        if d:
            irqs[d.group(1)] = int(d.group(2))
            continue
        m = LINE.search(line)
        if not m:
            continue
        kv = dict(x.split("=", 1) for x in m.group(2).split())
        (infos if m.group(1) == "BENCH-INFO" else recs).append(kv)
        if "mark1" in kv:
            marked.append(kv)
    for r in marked:
        r["dom0_notifs_per_req"] = dom0_per_req(r, irqs)

NOT_ID = set(METRICS) | {"rep", "late", "domu", "mark0", "mark1", "dev"}

# Several domUs (domu=I ndomu=N): one record per (point, repetition) with
# MB/s and IOPS summed over the domUs (they ran in the same time slot) and
# the per-MiB / per-request counters averaged.
multi, single = {}, []
for r in recs:
    if "domu" in r:
        key = tuple((k, v) for k, v in r.items() if k not in NOT_ID) + (("rep", r.get("rep")),)
        multi.setdefault(key, []).append(r)
    else:
        single.append(r)
late = 0
for key, rs in multi.items():
    agg = dict(key)
    want = int(agg.get("ndomu", "0") or 0)
    if len({x["domu"] for x in rs}) < want:
        problems.append(f"{dict(key)}: results from {len(rs)} of {want} domUs")
    for m in METRICS:
        vals = [num(x.get(m)) for x in rs if m in x]
        if not vals:
            continue
        if any(v is None for v in vals):
            agg[m] = "NA"
        elif m in ("mbps", "iops"):
            agg[m] = str(sum(vals))
        else:
            agg[m] = str(sum(vals) / len(vals))
    late = max([late] + [int(x.get("late", "0") or 0) for x in rs])
    single.append(agg)
recs = single

# Group repetitions: identity = every key that is not a metric or "rep".
groups = {}
for r in recs:
    ident = tuple((k, v) for k, v in r.items() if k not in NOT_ID)
    groups.setdefault(ident, []).append(r)


def stat(rows, metric):
    vals = [num(r.get(metric)) for r in rows if metric in r]
    if not vals:
        return None
    if any(v is None for v in vals):
        return "bad"
    return (min(vals), statistics.median(vals), max(vals), len(vals))


def point(want, metric, required=True, label="", reps=None):
    """min/med/max/n of METRIC over the group whose identity contains WANT."""
    rows = [r for ident, rs in groups.items() if all(dict(ident).get(k) == v for k, v in want.items()) for r in rs]
    s = stat(rows, metric) if rows else None
    if s is None or s == "bad":
        if required:
            problems.append(f"{label or want}: {metric} {'missing' if s is None else 'not a number'}")
        return None
    reps = reps or cfg["reps"]
    if s[3] < reps and required:
        problems.append(f"{label or want}: {metric} has {s[3]} of {reps} repetitions")
    return s


def paired(want_a, want_b, metric, diff=False):
    """min/med/max/n/geometric mean of A/B per repetition: the two runs of a
    repetition are adjacent in time, so slow drift of the host cancels out
    of each ratio. diff: A - B and its mean instead (quantities that can
    be 0 or below, such as a memory delta)."""
    def by_rep(want):
        return {r.get("rep"): num(r.get(metric)) for ident, rs in groups.items()
                if all(dict(ident).get(k) == v for k, v in want.items()) for r in rs}
    a, b = by_rep(want_a), by_rep(want_b)
    if diff:
        vals = [a[k] - b[k] for k in a if a[k] is not None and b.get(k) is not None]
    else:
        vals = [a[k] / b[k] for k in a if a[k] and b.get(k)]
    if not vals:
        return None
    return (min(vals), statistics.median(vals), max(vals), len(vals),
            statistics.mean(vals) if diff else statistics.geometric_mean(vals))


def beyond(pr, aa, diff=False):
    """Whether ours/C (pr) shows a difference the method can show: its
    geometric mean further from 1, either way, than the furthest A/A ratio
    (identical drivers: how far apart noise alone put them, in whichever
    direction); diff: its mean difference further from 0 than the furthest
    A/A difference. Not judged on fewer than 3 A/A pairs, whose range says
    nothing."""
    if pr is None or aa is None or aa[3] < 3:
        return "-"
    g = (lambda x: x) if diff else math.log
    return "yes" if abs(g(pr[4])) > max(abs(g(aa[0])), abs(g(aa[2]))) else "no"


def gm(s):
    return "-" if s is None else f"{s[4]:.2f}"


def f(s, nd=1):
    return "-" if s is None else f"{s[1]:.{nd}f}"


def rng(s, nd=1):
    return "-" if s is None else f"{s[1]:.{nd}f} [{s[0]:.{nd}f}-{s[2]:.{nd}f}]"


def ratio(a, b):
    return "-" if a is None or b is None or b[1] == 0 else f"{a[1] / b[1]:.2f}"


def csv(name, header, rows):
    with open(os.path.join(out, name + ".csv"), "w") as fh:
        fh.write(",".join(header) + "\n")
        for row in rows:
            fh.write(",".join("" if c is None else str(c) for c in row) + "\n")


def mmm(s):
    return [None, None, None, None] if s is None else [s[3], s[0], s[1], s[2]]


def table(title, header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print(f"\n== {title}")
    for row in [header] + rows:
        print("  ".join(str(c).rjust(n) for c, n in zip(row, w)))


plots = []


def gnuplot(name, script, data):
    dat = os.path.join(out, name + ".dat")
    with open(dat, "w") as fh:
        fh.write(data)
    with open(os.path.join(out, name + ".gp"), "w") as fh:
        fh.write(f"set terminal pngcairo size 1000,600 noenhanced\nset output '{os.path.join(out, name + '.png')}'\n"
                 "set grid\nset key outside right top\n" + script.replace("DAT", dat))
    plots.append(name)


# ---- 1. indirect sweep ------------------------------------------------------
if "indirect" in cfg["exps"]:
    rows, csvrows, dat = [], [], ""
    for op in cfg["ops"]:
        dat += f"# op={op}: segs c_med c_min c_max rs_med rs_min rs_max c_reqs rs_reqs\n"
        for segs in cfg["segs"]:
            p = {}
            for drv in ("c", "rs"):
                w = {"exp": "indirect", "driver": drv, "segs": str(segs), "op": op}
                lab = f"indirect {drv} segs={segs} {op}"
                p[drv] = (point(w, "mbps", label=lab), point(w, "reqs_per_mib", label=lab),
                          point(w, "copied_per_mib", drv == "rs", lab), point(w, "notifs_per_req", False, lab))
                hw = next((i.get("max_hw_kb") for i in infos if i.get("exp") == "indirect" and i.get("driver") == drv and i.get("segs") == str(segs)), None)
                csvrows.append([segs, op, drv] + mmm(p[drv][0]) + [f(p[drv][1], 3), f(p[drv][2], 0) if drv == "rs" else "", f(p[drv][3], 3) if drv == "rs" else "", hw])
            rows.append([segs, op, rng(p["c"][0]), rng(p["rs"][0]), ratio(p["rs"][0], p["c"][0]), f(p["c"][1], 2), f(p["rs"][1], 2), f(p["rs"][3], 3)])
            if p["c"][0] and p["rs"][0]:
                c, r = p["c"][0], p["rs"][0]
                dat += f"{segs} {c[1]} {c[0]} {c[2]} {r[1]} {r[0]} {r[2]} {p['c'][1][1] if p['c'][1] else 0} {p['rs'][1][1] if p['rs'][1] else 0}\n"
        dat += "\n\n"
    table("Xen indirect sweep: sequential 1 MiB O_DIRECT, MB/s median [min-max]; ring requests per MiB",
          ["segs", "op", "C MB/s", "ours MB/s", "ours/C", "C req/MiB", "ours req/MiB", "ours notif/req"], rows)
    csv("indirect", ["segs", "op", "driver", "n", "mbps_min", "mbps_median", "mbps_max", "reqs_per_mib_median", "copied_per_mib_median", "notifs_per_req_median", "max_hw_sectors_kb"], csvrows)
    plot = "set multiplot layout 1,2 title 'Xen indirect sweep (1 MiB sequential O_DIRECT)'\nset key top right inside\nset logscale x 2\nset xlabel 'max_indirect_segments'\nset ylabel 'MB/s'\nplot "
    plot += ", ".join(f"'DAT' index {i} using 1:2:3:4 with yerrorlines title 'C {op}', 'DAT' index {i} using 1:5:6:7 with yerrorlines title 'ours {op}'" for i, op in enumerate(cfg["ops"]))
    plot += "\nset ylabel 'ring requests per MiB'\nplot " + ", ".join(f"'DAT' index {i} using 1:8 with linespoints title 'C {op}', 'DAT' index {i} using 1:9 with linespoints title 'ours {op}'" for i, op in enumerate(cfg["ops"]))
    gnuplot("indirect", plot + "\nunset multiplot\n", dat)

# ---- 2. persistent grants -----------------------------------------------------
if "persist" in cfg["exps"]:
    rows, csvrows, dat = [], [], "# label c_med c_min c_max rs_med rs_min rs_max\n"
    for pers in cfg["persistent"]:
        bounce = {d: next((i.get("bounce") for i in infos if i.get("exp") == "persist" and i.get("driver") == d and i.get("persistent") == str(pers)), "?") for d in ("c", "rs")}
        for bs in cfg["bss"]:
            for op in cfg["pops"]:
                p = {}
                for drv in ("c", "rs"):
                    w = {"exp": "persist", "driver": drv, "persistent": str(pers), "bs": bs, "op": op}
                    lab = f"persist p={pers} {drv} bs={bs} {op}"
                    p[drv] = (point(w, "mbps", label=lab), point(w, "copied_per_mib", drv == "rs", lab))
                    csvrows.append([pers, bs, op, drv, cfg["jobs"]] + mmm(p[drv][0]) + [f(p[drv][1], 0) if drv == "rs" else "", bounce[drv]])
                rows.append([pers, bs, op, rng(p["c"][0]), rng(p["rs"][0]), ratio(p["rs"][0], p["c"][0]), bounce["c"], bounce["rs"], f(p["rs"][1], 0)])
                if p["c"][0] and p["rs"][0]:
                    c, r = p["c"][0], p["rs"][0]
                    dat += f"\"p{pers} {bs} {op}\" {c[1]} {c[0]} {c[2]} {r[1]} {r[0]} {r[2]}\n"
    where = f"{cfg['ndomu']} domUs at once, {cfg['jobs']} fio job(s) each" if cfg["ndomu"] > 1 else f"1 domU, {cfg['jobs']} fio job(s)"
    table(f"Xen persistent grants: {where}, aggregate MB/s median [min-max]; bytes copied per MiB",
          ["feature_persistent", "bs", "op", "C MB/s", "ours MB/s", "ours/C", "C bounce", "ours bounce", "ours copied B/MiB"], rows)
    csv("persistent", ["feature_persistent", "bs", "op", "driver", "jobs_per_domu", "n", "mbps_min", "mbps_median", "mbps_max", "copied_bytes_per_mib_median", "bounce_buffer"], csvrows)
    gnuplot("persistent", "set title 'Xen persistent grants (blkback feature_persistent)'\nset style data histogram\n"
            "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.6 border -1\nset xtics rotate by -30\nset logscale y\nset ylabel 'MB/s'\n"
            "plot 'DAT' using 2:3:4:xtic(1) title 'C xen-blkfront', '' using 5:6:7 title 'ours'\n", dat)

# ---- 3. alignment ---------------------------------------------------------------
if "align" in cfg["exps"]:
    trows, csvrows = [], []
    for drv in ("c", "rs"):
        t = next((r for r in recs if r.get("exp") == "aligntopo" and r.get("driver") == drv), None)
        fs = next((r for r in recs if r.get("exp") == "alignfs" and r.get("driver") == drv), None)
        if t is None:
            problems.append(f"align {drv}: topology missing")
            t = {}
        if fs is None or num(fs.get("part_start")) is None or num(fs.get("ext4_block")) is None:
            problems.append(f"align {drv}: partition/mkfs result missing or not a number ({fs})")
            fs = fs or {}
        for k in ("phys", "io_min", "io_opt"):
            if num(t.get(k)) is None:
                problems.append(f"align {drv}: {k} missing")
        trows.append([drv, t.get("logical"), t.get("phys"), t.get("io_min"), t.get("io_opt"), fs.get("part_start"), fs.get("part_start_aligned"), fs.get("ext4_block"), fs.get("stride"), fs.get("stripe_width")])
    table("Alignment: backing disk 4096-byte physical sectors (min_io 4096, opt_io published); what each driver reports and what sfdisk/mkfs.ext4 make of it",
          ["driver", "logical", "phys", "io_min", "io_opt", "part start (sector)", "aligned", "ext4 block", "stride", "stripe width"], trows)
    rows, dat = [], "# bs c_med c_min c_max rs_med rs_min rs_max\n"
    for bs in cfg["abss"]:
        p = {}
        for drv in ("c", "rs"):
            w = {"exp": "align", "driver": drv, "bs": bs}
            p[drv] = (point(w, "iops", label=f"align {drv} bs={bs}"), point(w, "mbps", label=f"align {drv} bs={bs}"))
            tr = next(r for r in trows if r[0] == drv)
            csvrows.append([drv, bs] + mmm(p[drv][0]) + [f(p[drv][1], 2)] + tr[1:])
        rows.append([bs, rng(p["c"][0], 0), rng(p["rs"][0], 0), ratio(p["rs"][0], p["c"][0]), f(p["c"][1], 2), f(p["rs"][1], 2)])
        if p["c"][0] and p["rs"][0]:
            c, r = p["c"][0], p["rs"][0]
            dat += f"{bs} {c[1]} {c[0]} {c[2]} {r[1]} {r[0]} {r[2]}\n"
    table("Alignment: random O_DIRECT writes, IOPS median [min-max]", ["bs", "C IOPS", "ours IOPS", "ours/C", "C MB/s", "ours MB/s"], rows)
    csv("align", ["driver", "bs", "n", "iops_min", "iops_median", "iops_max", "mbps_median", "logical", "phys", "io_min", "io_opt", "part_start", "part_start_aligned", "ext4_block", "ext4_stride", "ext4_stripe_width"], csvrows)
    gnuplot("align", "set title 'Random O_DIRECT writes on a 4K-physical-sector backend'\nset style data histogram\n"
            "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.6 border -1\nset ylabel 'IOPS'\nset xlabel 'write size'\n"
            "plot 'DAT' using 2:3:4:xtic(1) title 'C xen-blkfront', '' using 5:6:7 title 'ours'\n", dat)

# ---- 4. virtio ------------------------------------------------------------------
if "virtio" in cfg["exps"]:
    names = {"qd1": ("4k randread QD1", "iops"), "poll1": ("4k randread QD1, polled (io_uring hipri, poll_queues=1)", "iops"),
             "qd32": ("4k randread QD32", "iops"), "seqread": ("1M seq read", "mbps"), "seqwrite": ("1M seq write", "mbps")}
    rows, csvrows, dat = [], [], "# wl c_med c_min c_max rs_med rs_min rs_max (ours/C normalised: C median = 1)\n"
    for wl in cfg["vwl"]:
        title, metric = names[wl]
        p = {}
        for drv in ("c", "rs"):
            w = {"exp": "virtio", "driver": drv, "wl": wl}
            p[drv] = (point(w, metric, label=f"virtio {drv} {wl}"), point(w, "notifs_per_req", drv == "rs", f"virtio {drv} {wl}"))
            csvrows.append([wl, drv, metric] + mmm(p[drv][0]) + [f(p[drv][1], 3) if drv == "rs" else ""])
        rows.append([title, metric, rng(p["c"][0]), rng(p["rs"][0]), ratio(p["rs"][0], p["c"][0]), f(p["rs"][1], 3)])
        if p["c"][0] and p["rs"][0] and p["c"][0][1]:
            c, r, b = p["c"][0], p["rs"][0], p["c"][0][1]
            dat += f"\"{title}\" {c[1] / b} {c[0] / b} {c[2] / b} {r[1] / b} {r[0] / b} {r[2] / b}\n"
    table("virtio-blk, same disk, same boot: median [min-max]", ["workload", "unit", "C virtio_blk", "ours", "ours/C", "ours notif/req"], rows)
    csv("virtio", ["workload", "driver", "unit", "n", "min", "median", "max", "notifs_per_req_median"], csvrows)
    gnuplot("virtio", "set title 'virtio-blk: throughput relative to C virtio_blk (median, min-max bars)'\nset style data histogram\n"
            "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.6 border -1\nset ylabel 'relative to C (C median = 1)'\nset yrange [0:*]\n"
            "plot 'DAT' using 2:3:4:xtic(1) title 'C virtio_blk', '' using 5:6:7 title 'ours'\n", dat)

# ---- 4b. memory per disk ----------------------------------------------------------
MEM = (("memfree_kib", "free memory drop"), ("slab_kib", "Slab"), ("sunreclaim_kib", "SUnreclaim"))
# The Xen memory experiments' measures: MEM and the free memory drop without
# the module's own size, a measure of its own (add_free_without_module).
XMEM = MEM[:1] + (("memfree_nomod_kib", "free memory drop - module"),) + MEM[1:]
XMEM_SHORT = {"memfree_kib": "free", "memfree_nomod_kib": "free-mod", "slab_kib": "Slab", "sunreclaim_kib": "SUnrecl"}


def add_free_without_module(exp):
    """memfree_nomod_kib on every record of EXP: memfree_kib - module_kib."""
    for ident, rs in groups.items():
        if dict(ident).get("exp") == exp:
            for r in rs:
                a, b = num(r.get("memfree_kib")), num(r.get("module_kib"))
                r["memfree_nomod_kib"] = "NA" if a is None or b is None else str(a - b)


if "memory" in cfg["exps"]:
    n = int(cfg.get("memdisks", 8))
    names = {"c": "C virtio_blk", "rs": "ours"}
    info = {i.get("driver"): i for i in infos if i.get("exp") == "memory"}

    def by_rep(drv, disks, metric):
        return {r.get("rep"): num(r.get(metric)) for ident, rs in groups.items()
                if dict(ident).get("exp") == "memory" and dict(ident).get("driver") == drv
                and dict(ident).get("disks") == str(disks) for r in rs}

    # The disk counts measured between 1 and n (seeds.sh: mempoints).
    pts = [int(k) for k in cfg.get("mempoints", [1, n])]
    per, csvrows, curves = {}, [], {}
    for drv in ("c", "rs"):
        i = info.get(drv, {})
        rows = []
        for metric, title in MEM:
            lab = f"memory {drv}"
            at = {k: point({"exp": "memory", "driver": drv, "disks": str(k)}, metric, label=f"{lab} {k} disk(s)") for k in pts}
            a, b = by_rep(drv, 1, metric), by_rep(drv, n, metric)
            # Per repetition, so that what one snapshot's noise adds to
            # both of its points cancels out.
            slopes = [(b[k] - a[k]) / (n - 1) for k in a if a[k] is not None and b.get(k) is not None]
            pd = (min(slopes), statistics.median(slopes), max(slopes), len(slopes)) if slopes else None
            per[(drv, metric)] = pd
            curves[(drv, metric)] = at
            rows.append([title] + [rng(at[k], 0) for k in pts] + [rng(pd, 0)])
            csvrows.append([drv, metric] + [None if at[k] is None else at[k][1] for k in pts] + [None if pd is None else pd[1], None])
        mod = point({"exp": "memory", "driver": drv, "disks": "1"}, "module_kib", label=f"memory {drv} module")
        table(f"Memory, {names[drv]}, KiB median [min-max]: with {', '.join(map(str, pts))} disks (module included: {f(mod, 0)} KiB), "
              f"and per disk ({n} disks - 1 disk) / {n - 1}; {i.get('queues', '?')} queues x {i.get('nr_requests', '?')} requests, "
              f"max_segments {i.get('max_segments', '?')}",
              ["measure"] + [f"{k} disk{'s' if k > 1 else ''}" for k in pts] + ["per disk"], rows)
    # Memory against the number of disks, a panel per measure, a line per
    # driver (median, min-max bars).
    dat = ""
    for metric, title in MEM:
        for drv in ("c", "rs"):
            dat += f"# {title}, {names[drv]}: disks median min max\n"
            for k in pts:
                s_ = curves[(drv, metric)][k]
                if s_:
                    dat += f"{k} {s_[1]} {s_[0]} {s_[2]}\n"
            dat += "\n\n"
    plot = ("set multiplot layout 1,3 title 'virtio-blk: memory against disks (2 queues each; median, min-max bars)'\n"
            "set key top left inside\nset xlabel 'disks'\nset ylabel 'KiB'\nset xrange [0:*]\n")
    for j, (metric, title) in enumerate(MEM):
        plot += (f"set title '{title}'\nplot 'DAT' index {2 * j} using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'C virtio_blk', "
                 f"'' index {2 * j + 1} using 1:2:3:4 with yerrorlines lw 2 lc rgb '#d62728' title 'ours'\n")
    gnuplot("memory", plot + "unset multiplot\n", dat)
    rows = []
    for metric, title in MEM:
        c, r = per.get(("c", metric)), per.get(("rs", metric))
        rows.append([title, f(c, 0), f(r, 0), ratio(r, c)])
    table("Memory per disk, KiB median: C and ours, same boot", ["measure", "C virtio_blk", "ours", "ours/C"], rows)
    rows = []
    for wl, title in (("seqwrite", "1M seq write QD8"), ("seqread", "1M seq read QD8")):
        p = {drv: point({"exp": "memory", "driver": drv, "wl": wl}, "mbps", label=f"memory {drv} {wl}") for drv in ("c", "rs")}
        pr = paired({"exp": "memory", "driver": "rs", "wl": wl}, {"exp": "memory", "driver": "c", "wl": wl}, "mbps")
        rows.append([title, rng(p["c"]), rng(p["rs"]), ratio(p["rs"], p["c"]), gm(pr)])
        for drv in ("c", "rs"):
            csvrows.append([drv, wl, None, None, None, None if p[drv] is None else p[drv][1]])
    table(f"Throughput in the same boot ({n} disks bound, fio on the first; C and ours alternating): MB/s median [min-max]",
          ["workload", "C virtio_blk", "ours", "ours/C", "ours/C per rep (geo mean)"], rows)
    csv("memory", ["driver", "measure"] + [f"kib_{k}_disk{'s' if k > 1 else ''}" for k in pts] + ["kib_per_disk", "mbps_median"], csvrows)

# ---- 4e/4f. attach time ------------------------------------------------------------
ATTACH = {"c": "C", "rs": "ours", "c_again": "C again"}
ATTACH_CSV = ["driver", "n", "min_ms", "median_ms", "max_ms", "rs_per_c_n", "rs_per_c_min", "rs_per_c_median",
              "rs_per_c_max", "rs_per_c_geomean", "aa_n", "aa_min", "aa_median", "aa_max", "aa_geomean", "beyond_aa"]
ATTACH_COLS = ["ours/C paired", "geomean", "A/A C/C paired", "A/A geomean", "beyond A/A"]


def attach_point(want, label, reps):
    """C, ours and C again at one point (WANT) of an attach experiment:
    their times, ours/C and C again/C per repetition, and the table's
    ratio columns, the CSV rows (after KEY) and the plot's data line."""
    p = {drv: point(dict(want, driver=drv), "attach_ms", label=f"{label} {ATTACH[drv]}", reps=reps) for drv in ATTACH}
    pr = paired(dict(want, driver="rs"), dict(want, driver="c"), "attach_ms")
    aa = paired(dict(want, driver="c_again"), dict(want, driver="c"), "attach_ms")
    seen = beyond(pr, aa)
    cols = [rng(pr, 2), gm(pr), rng(aa, 2), gm(aa), seen]
    rows = [[drv] + mmm(p[drv]) + ([None] * 5 if drv != "rs" else mmm(pr) + [gm(pr)]) + (mmm(aa) + [gm(aa), seen] if drv == "rs" else [None] * 6)
            for drv in ATTACH]
    dat = " ".join("- - -" if p[drv] is None else f"{p[drv][1]} {p[drv][0]} {p[drv][2]}" for drv in ATTACH)
    return p, cols, rows, dat


def bars(name, title, xlabel, ylabel, dat, names, yrange="set yrange [0:*]\n"):
    """A histogram with min-max error bars: DAT's column 1 the group, then
    median min max per bar (one bar per name)."""
    using = ", ".join(("'DAT'" if i == 0 else "''") + f" using {3 * i + 2}:{3 * i + 3}:{3 * i + 4}" + (":xtic(1)" if i == 0 else "") + f" title '{t}'"
                      for i, t in enumerate(names))
    gnuplot(name, f"set title '{title}'\nset style data histogram\nset style histogram errorbars gap 1 lw 1\n"
            f"set style fill solid 0.6 border -1\nset xlabel '{xlabel}'\nset ylabel '{ylabel}'\n{yrange}plot {using}\n", dat)


if "attach" in cfg["exps"]:
    reps = cfg.get("attach_reps", cfg["reps"])
    rows, csvrows, dat = [], [], "# disks, then per driver (C, ours, C again): median min max (ms)\n"
    for k in cfg["attachdisks"]:
        p, cols, crows, d = attach_point({"exp": "attach", "disks": str(k)}, f"attach {k} disk(s)", reps)
        per_disk = {drv: None if p[drv] is None else f"{p[drv][1] / int(k):.1f}" for drv in ("c", "rs")}
        rows.append([k, rng(p["c"]), rng(p["rs"]), per_disk["c"] or "-", per_disk["rs"] or "-"] + cols)
        csvrows += [[k] + r for r in crows]
        dat += f"{k} {d}\n"
    table(f"Attach time (virtio-blk, disks of 2 queues; bind to /sys/block, ms): median [min-max] of {reps} repetitions, "
          "C, ours and C again alternating in one boot; ours/C per repetition, median [min-max] and geometric mean; "
          "the A/A spread: C again/C per repetition. 'beyond A/A' as for latency",
          ["disks", "C virtio_blk", "ours", "C ms/disk", "ours ms/disk"] + ATTACH_COLS, rows)
    csv("attach", ["disks"] + ATTACH_CSV, csvrows)
    bars("attach", "virtio-blk: time from bind to the last disk in /sys/block (median, min-max bars)", "disks", "ms", dat,
         ["C virtio_blk", "ours", "C again"])

if "xattach" in cfg["exps"]:
    reps = cfg.get("attach_reps", cfg["reps"])
    p, cols, crows, d = attach_point({"exp": "xattach"}, "xattach", reps)
    table(f"Attach time (Xen, one vbd of the userspace blkif backend; its frontend node in xenstore to /sys/block, ms): "
          f"median [min-max] of {reps} repetitions, C, ours and C again alternating in one boot; ours/C and the A/A spread "
          "as for virtio",
          ["vbds", "C xen-blkfront", "ours", "C again"] + ATTACH_COLS, [[1, rng(p["c"]), rng(p["rs"]), rng(p["c_again"])] + cols])
    csv("xattach", ["vbds"] + ATTACH_CSV, [[1] + r for r in crows])
    bars("xattach", "Xen: time from the vbd frontend node to its disk in /sys/block (median, min-max bars)", "vbds", "ms",
         "# vbds, then per driver (C, ours, C again): median min max (ms)\n" + f"1 {d}\n", ["C xen-blkfront", "ours", "C again"])

# ---- 4g. Xen memory per vbd ---------------------------------------------------------
if "xmemory" in cfg["exps"]:
    add_free_without_module("xmemory")
    info = {i.get("driver"): i for i in infos if i.get("exp") == "xmemory"}
    mod = {drv: point({"exp": "xmemory", "driver": drv, "stage": "up"}, "module_kib", label=f"xmemory {drv} module") for drv in ATTACH}
    rows, csvrows, dat = [], [], "# stage/measure, then per driver (C, ours, C again): median min max (KiB)\n"
    for stage, stitle in (("up", "vbd up"), ("io", "after fio")):
        for metric, title in XMEM:
            want = {"exp": "xmemory", "stage": stage}
            p = {drv: point(dict(want, driver=drv), metric, label=f"xmemory {stage} {ATTACH[drv]} {title}") for drv in ATTACH}
            pr = paired(dict(want, driver="rs"), dict(want, driver="c"), metric, diff=True)
            aa = paired(dict(want, driver="c_again"), dict(want, driver="c"), metric, diff=True)
            seen = beyond(pr, aa, diff=True)
            rows.append([stitle, title] + [rng(p[drv], 0) for drv in ATTACH] + [ratio(p["rs"], p["c"]), rng(pr, 0), rng(aa, 0), seen])
            csvrows.append([stage, metric] + [f(p[drv], 0) for drv in ATTACH] + [ratio(p["rs"], p["c"])] + mmm(pr) + mmm(aa) + [seen])
            dat += f"{stage}:{XMEM_SHORT[metric]} " + " ".join("- - -" if p[drv] is None else f"{p[drv][1]} {p[drv][0]} {p[drv][2]}" for drv in ATTACH) + "\n"
    pers = {drv: i.get("persistent", "?") for drv, i in info.items()}
    table(f"Memory of one Xen vbd (userspace blkif backend, persistent grants offered), KiB drop from before insmod: median [min-max] "
          f"of {cfg['reps']} repetitions, C, ours and C again in one boot; up = the disk added, after fio = after 4k randread QD32 and "
          f"1M seq write QD8 ({cfg['runtime']} s each); module sizes (in free memory drop): C {f(mod['c'], 0)} KiB, ours {f(mod['rs'], 0)} KiB; "
          f"grants the backend holds mapped as persistent after fio (C, ours): {pers.get('c', '?')}, {pers.get('rs', '?')}; ours-C and the A/A spread "
          "(C again-C) per repetition, KiB; 'beyond A/A' = the mean of ours-C further from 0 than the furthest A/A difference",
          ["stage", "measure"] + [ATTACH[drv] for drv in ATTACH] + ["ours/C", "ours-C paired", "A/A C-C paired", "beyond A/A"], rows)
    csv("xmemory", ["stage", "measure", "c_median_kib", "rs_median_kib", "c_again_median_kib", "rs_per_c", "rs_minus_c_n",
                    "rs_minus_c_min", "rs_minus_c_median", "rs_minus_c_max", "aa_n", "aa_min", "aa_median", "aa_max", "beyond_aa"], csvrows)
    bars("xmemory", "Xen: memory of one vbd, drop from before insmod (median, min-max bars)", "stage:measure", "KiB", dat,
         ["C xen-blkfront", "ours", "C again"], yrange="")

# ---- 4h. Xen vbds at scale: memory and attach time -------------------------------
if "xscale" in cfg["exps"]:
    XS = {"c": "C", "rs": "ours", "rs_again": "ours again"}
    reps = cfg.get("xscale_reps", cfg["reps"])
    pts = [str(k) for k in cfg.get("xscale_points", [])]
    add_free_without_module("xscale")
    rows, csvrows, dat = [], [], "# vbds:stage:measure, then per driver (C, ours, ours again): median min max (KiB)\n"
    for k, stage in [(k, "up") for k in pts] + [(pts[-1], "io")] if pts else []:
        for metric, title in XMEM:
            want = {"exp": "xscale", "disks": k, "stage": stage}
            p = {drv: point(dict(want, driver=drv), metric, label=f"xscale {k} {stage} {XS[drv]} {title}", reps=reps) for drv in XS}
            pr = paired(dict(want, driver="rs"), dict(want, driver="c"), metric, diff=True)
            aa = paired(dict(want, driver="rs_again"), dict(want, driver="rs"), metric, diff=True)
            seen = beyond(pr, aa, diff=True)
            per_vbd = "-" if pr is None else f"{pr[4] / int(k):.0f}"
            rows.append([k, "vbds up" if stage == "up" else "after fio", title] + [rng(p[drv], 0) for drv in XS]
                        + [ratio(p["rs"], p["c"]), rng(pr, 0), per_vbd, rng(aa, 0), seen])
            csvrows.append([k, stage, metric] + [f(p[drv], 0) for drv in XS] + [ratio(p["rs"], p["c"])] + mmm(pr) + [per_vbd] + mmm(aa) + [seen])
            if metric in ("memfree_nomod_kib", "slab_kib"):
                dat += f"{k}:{stage}:{XMEM_SHORT[metric]} " + " ".join("- - -" if p[drv] is None else f"{p[drv][1]} {p[drv][0]} {p[drv][2]}" for drv in XS) + "\n"
    mod = {drv: point({"exp": "xscale", "driver": drv, "stage": "up"}, "module_kib", required=False) for drv in ("c", "rs")}
    table(f"Memory of many Xen vbds (xen-blkback, persistent grants offered, all vbds on one dom0 disk), KiB drop from before insmod: "
          f"median [min-max] of {reps} boots; each boot C, then ours, then ours again (C binds a blkback vbd once per boot, first), "
          f"the count grown {' -> '.join(pts)}; after fio = 4k randread QD32 and 1M write QD8 over all the disks ({cfg['runtime']} s each); "
          f"module sizes (in free memory drop): C {f(mod['c'], 0)} KiB, ours {f(mod['rs'], 0)} KiB; ours-C per boot and per vbd (its mean / vbds); "
          "the A/A spread: ours again-ours per boot; 'beyond A/A' = the mean of ours-C further from 0 than the furthest A/A difference",
          ["vbds", "stage", "measure"] + list(XS.values()) + ["ours/C", "ours-C paired", "ours-C per vbd", "A/A paired", "beyond A/A"], rows)
    csv("xscale_memory", ["vbds", "stage", "measure", "c_median_kib", "rs_median_kib", "rs_again_median_kib", "rs_per_c", "rs_minus_c_n",
                          "rs_minus_c_min", "rs_minus_c_median", "rs_minus_c_max", "rs_minus_c_per_vbd", "aa_n", "aa_min", "aa_median",
                          "aa_max", "beyond_aa"], csvrows)
    bars("xscale_memory", "Xen: memory of 1-32 blkback vbds, drop from before insmod (median, min-max bars)", "vbds:stage:measure", "KiB",
         dat, list(XS.values()), yrange="")
    rows, csvrows, dat = [], [], "# vbds, then per driver (C, ours, ours again): median min max (ms)\n"
    for k in pts:
        want = {"exp": "xscale_attach", "disks": k}
        p = {drv: point(dict(want, driver=drv), "attach_ms", label=f"xscale attach {k} {XS[drv]}", reps=reps) for drv in XS}
        pr = paired(dict(want, driver="rs"), dict(want, driver="c"), "attach_ms")
        aa = paired(dict(want, driver="rs_again"), dict(want, driver="rs"), "attach_ms")
        seen = beyond(pr, aa)
        bound = next((r.get("bound") for ident, rs in groups.items() if dict(ident).get("exp") == "xscale_attach"
                      and dict(ident).get("disks") == k for r in rs), "?")
        rows.append([k, bound] + [rng(p[drv]) for drv in XS] + [rng(pr, 2), gm(pr), rng(aa, 2), gm(aa), seen])
        csvrows.append([k, bound] + [f(p[drv]) for drv in XS] + mmm(pr) + [gm(pr)] + mmm(aa) + [gm(aa), seen])
        dat += f"{k} " + " ".join("- - -" if p[drv] is None else f"{p[drv][1]} {p[drv][0]} {p[drv][2]}" for drv in XS) + "\n"
    table(f"Attach time of many Xen vbds (xen-blkback): from the first of the new vbds written to the driver's bind file to the last new "
          f"disk in /sys/block, ms; median [min-max] of {reps} boots, each growing the count {' -> '.join(pts)} with C, ours, ours again; "
          "ours/C per boot and the A/A spread (ours again/ours) as for virtio",
          ["vbds", "bound", "C", "ours", "ours again", "ours/C paired", "geomean", "A/A paired", "A/A geomean", "beyond A/A"], rows)
    csv("xscale_attach", ["vbds", "bound", "c_median_ms", "rs_median_ms", "rs_again_median_ms", "rs_per_c_n", "rs_per_c_min",
                          "rs_per_c_median", "rs_per_c_max", "rs_per_c_geomean", "aa_n", "aa_min", "aa_median", "aa_max",
                          "aa_geomean", "beyond_aa"], csvrows)
    bars("xscale_attach", f"Xen: time to bring up blkback vbds, the count grown {' -> '.join(pts)} (median, min-max bars)", "vbds", "ms", dat,
         list(XS.values()))

# ---- 4c/4d. latency: completion-latency percentiles from fio's JSON -------------
LAT_EXPS = [e for e in ("latency", "xlatency") if e in cfg["exps"]]
if LAT_EXPS:
    LAT = re.compile(r"BENCH-LAT exp=latency ((?:\S+=\S+ )+)(\{.*\})\s*$")
    LWL = {"qd1": ("4k randread QD1", "read"), "qd32": ("4k randread QD32", "read"), "seqwrite": ("1M seq write QD4", "write")}
    SHOWN = (("p50", "50.000000"), ("p99", "99.000000"), ("p99.9", "99.900000"))
    # Per setup: its title, the labels of its CDF curves, ours/C as (ours,
    # C) labels and the A/A pair. virtio: C ("a"), ours, C again ("b"), all
    # on one disk; Xen: C on xvda ("a") and xvdb ("b") in a first phase,
    # then C ("c") and ours on the other vbd (ours on xvdb in one boot, on
    # xvda in a second).
    setups = []
    if "latency" in LAT_EXPS:
        setups.append(("virtio", "virtio-blk, one disk", (("a", "C"), ("b", "C again"), ("rs", "ours")), ("rs", "a"), ("b", "a")))
    if "xlatency" in LAT_EXPS:
        for pers in cfg["persistent"]:
            setups.append((f"xen-p{pers}", f"Xen, feature_persistent={pers}, two vbds of one disk, ours on xvdb in one boot and xvda in a second",
                           (("a", "A/A C xvda"), ("b", "A/A C xvdb"), ("c", "C"), ("rs", "ours")), ("rs", "c"), ("b", "a")))
    # runs[(setup, label, wl)][rep] = {percentile key: microseconds, "N": samples}
    runs = {}
    for log in sorted(glob.glob(os.path.join(out, "logs", "*.log"))):
        for raw in open(log, errors="replace"):
            m = LAT.search(raw.replace("\r", ""))
            if not m:
                continue
            kv = dict(x.split("=", 1) for x in m.group(1).split())
            setup = f"xen-p{kv['persistent']}" if "persistent" in kv else "virtio"
            lab, wl, rep = kv.get("driver"), kv.get("wl"), kv.get("rep")
            try:
                clat = json.loads(m.group(2))["jobs"][0][LWL[wl][1]]["clat_ns"]
                pct = {k: v / 1000 for k, v in clat["percentile"].items()}
                pct["N"] = clat["N"]
            except (ValueError, KeyError, IndexError, TypeError) as e:
                problems.append(f"latency {setup} {lab} {wl} rep {rep}: fio JSON does not parse ({type(e).__name__}: {e})")
                continue
            runs.setdefault((setup, lab, wl), {})[rep] = pct

    def lat_stat(setup, lab, wl, key):
        vals = [r[key] for r in runs.get((setup, lab, wl), {}).values() if num(r.get(key)) is not None]
        return (min(vals), statistics.median(vals), max(vals), len(vals)) if vals else None

    def lat_paired(setup, pair, wl, key):
        """x/y per repetition (the two runs of a repetition are adjacent in time)."""
        a, b = runs.get((setup, pair[0], wl), {}), runs.get((setup, pair[1], wl), {})
        vals = [a[k][key] / b[k][key] for k in a if k in b and a[k].get(key) and b[k].get(key)]
        if not vals:
            return None
        return (min(vals), statistics.median(vals), max(vals), len(vals), statistics.geometric_mean(vals))

    csvrows = []
    for setup, stitle, labels, ours_c, aa_pair in setups:
        rows, dat, blocks = [], "", []
        for wl in cfg["lwl"]:
            title = LWL[wl][0]
            for lab, _ in labels:
                got = len(runs.get((setup, lab, wl), {}))
                if got < cfg["latency_reps"]:
                    problems.append(f"latency {setup} {lab} {wl}: {got} of {cfg['latency_reps']} repetitions")
            for name, key in SHOWN:
                c, ours = lat_stat(setup, ours_c[1], wl, key), lat_stat(setup, "rs", wl, key)
                pr, aa = lat_paired(setup, ours_c, wl, key), lat_paired(setup, aa_pair, wl, key)
                seen = beyond(pr, aa)
                rows.append([title, name, rng(c, 0), rng(ours, 0), rng(pr, 2), gm(pr), rng(aa, 2), gm(aa), seen])
                csvrows.append([setup, wl, name, f(c, 1), f(ours, 1)] + mmm(pr) + [gm(pr)] + mmm(aa) + [gm(aa), seen])
            n = {lab: lat_stat(setup, lab, wl, "N") for lab in (ours_c[1], "rs")}
            rows.append([title, "samples/run", f(n[ours_c[1]], 0), f(n["rs"], 0), "", "", "", "", ""])
            # CDF: per label, the median over repetitions of each
            # percentile fio reported (x: microseconds; y: the percentile).
            for lab, name in labels:
                keys = sorted({k for r in runs.get((setup, lab, wl), {}).values() for k in r if k != "N"}, key=float)
                dat += f"# {title}, {name}: percentile median_us\n"
                for k in keys:
                    v = lat_stat(setup, lab, wl, k)
                    if v:
                        dat += f"{float(k)} {v[1]}\n"
                dat += "\n\n"
                blocks.append((wl, lab, name))
        table(f"Latency ({stitle}; completion latency from fio's JSON, us): median [min-max] of {cfg['latency_reps']} repetitions, "
              f"C and ours; ours/C ({ours_c[0]}/{ours_c[1]}) per repetition, median [min-max] and geometric mean; the A/A spread: "
              f"{aa_pair[0]}/{aa_pair[1]} per repetition, the C driver against itself. "
              "'beyond A/A' = ours/C's geometric mean further from 1 than the furthest A/A ratio, either way (judged from 3 A/A pairs on)",
              ["workload", "percentile", "C", "ours", "ours/C paired", "geomean", "A/A C/C paired", "A/A geomean", "beyond A/A"], rows)
        # One panel per workload, a curve per driver; the y axis is the
        # percentile stretched towards the tail (-log10(1 - p/100)), so that
        # p99 and p99.9 get as much room as the body of the distribution.
        plot = (f"set multiplot layout 1,{len(cfg['lwl'])} title '{stitle}: completion latency CDF "
                f"(median of {cfg['latency_reps']} repetitions per percentile)'\nset key top left inside\nset logscale x\n"
                "set xlabel 'completion latency (us)'\nset ylabel 'percentile'\n"
                "set ytics ('0' 0, '50' log10(2), '90' 1, '99' 2, '99.9' 3, '99.99' 4)\nset yrange [0:4.2]\n")
        styles = {"a": "lw 2 lc rgb '#1f77b4'", "b": "lw 1 dt 2 lc rgb '#1f77b4'", "c": "lw 1 lc rgb '#2ca02c'", "rs": "lw 2 lc rgb '#d62728'"}
        for wl in cfg["lwl"]:
            curves = [f"'DAT' index {i} using 2:(-log10(1 - $1 / 100)) with linespoints {styles[lab]} title '{name}'"
                      for i, (w, lab, name) in enumerate(blocks) if w == wl]
            plot += f"set title '{LWL[wl][0]}'\nplot " + ", ".join(curves) + "\n"
        gnuplot("latency" if setup == "virtio" else f"latency-{setup}", plot + "unset multiplot\n", dat)
    csv("latency", ["setup", "workload", "percentile", "c_median_us", "rs_median_us",
                    "n", "rs_per_c_min", "rs_per_c_median", "rs_per_c_max", "rs_per_c_geomean",
                    "aa_n", "aa_min", "aa_median", "aa_max", "aa_geomean", "beyond_aa"], csvrows)

# ---- 5. compare: C and ours side by side on one disk ----------------------------
COMPARE_WL = {"rr4k": ("4k randread QD32", "iops"), "rr4k1": ("4k randread QD1", "iops"),
              "seqread": ("1M seq read QD4", "mbps"), "seqwrite": ("1M seq write QD4", "mbps")}
# The domU's cost per request in compare's runs: (metric, column title, decimals).
COST = (("cpu_us_per_req", "CPU us", 1), ("irqs_per_req", "blkif irqs", 3), ("ctxsw_per_req", "context switches", 2),
        ("ipis_per_req", "IPIs", 3))
if "compare" in cfg["exps"]:
    rows, csvrows, costrows, dat = [], [], [], "# label c_med c_min c_max rs_med rs_min rs_max (C median = 1)\n"
    for pers in cfg["persistent"]:
        for wl in cfg["cwl"]:
            title, metric = COMPARE_WL[wl]
            p, cost = {}, {}
            for drv in ("c", "rs"):
                w = {"exp": "compare", "driver": drv, "persistent": str(pers), "wl": wl}
                lab = f"compare p={pers} {drv} {wl}"
                p[drv] = (point(w, "mbps", label=lab, reps=cfg["compare_reps"]), point(w, metric, label=lab, reps=cfg["compare_reps"]),
                          point(w, "dom0_notifs_per_req", label=lab, reps=cfg["compare_reps"]),
                          point(w, "notifs_per_req", drv == "rs", lab, reps=cfg["compare_reps"]))
                cost[drv] = [point(w, m, label=lab, reps=cfg["compare_reps"]) for m, _, _ in COST]
                csvrows.append([pers, wl, drv, metric] + mmm(p[drv][1]) + [f(p[drv][0], 2), f(p[drv][2], 3), f(p[drv][3], 3) if drv == "rs" else ""]
                               + [f(c, nd) for c, (_, _, nd) in zip(cost[drv], COST)])
            nd = 0 if metric == "iops" else 1
            pr = paired({**w, "driver": "rs"}, {**w, "driver": "c"}, metric)
            csvrows[-2] += [""]
            csvrows[-1] += [f(pr, 3)]
            rows.append([pers, title, metric, rng(p["c"][1], nd), rng(p["rs"][1], nd), ratio(p["rs"][1], p["c"][1]), rng(pr, 2), gm(pr),
                         f(p["c"][2], 3), f(p["rs"][2], 3), f(p["rs"][3], 3)])
            costrows.append([pers, title] + [x for c, r, (_, _, nd) in zip(cost["c"], cost["rs"], COST) for x in (f(c, nd), f(r, nd), ratio(r, c))])
            if p["c"][1] and p["rs"][1] and p["c"][1][1]:
                c, r, b = p["c"][1], p["rs"][1], p["c"][1][1]
                dat += f"\"p{pers} {title}\" {c[1] / b} {c[0] / b} {c[2] / b} {r[1] / b} {r[0] / b} {r[2] / b}\n"
    table(f"Xen C vs ours: one dom0 disk, two vbds (C xvda and ours xvdb in one boot, swapped in a second), repetitions alternating (C first, then ours first); median [min-max] of {cfg['compare_reps']}; ours/C of the medians, and paired: median [min-max] of each repetition's ours/C; backend notifications per ring request counted in dom0",
          ["feature_persistent", "workload", "unit", "C", "ours", "ours/C", "ours/C paired", "paired geomean", "C dom0 notif/req", "ours dom0 notif/req", "ours own notif/req"], rows)
    table(f"Xen C vs ours, the domU's cost per request in the same runs (median of {cfg['compare_reps']}): CPU time (all vCPUs, "
          "/proc/stat), interrupts from the blkif event channels, context switches, IPIs (RES and CAL rows of /proc/interrupts); ours/C of the medians",
          ["feature_persistent", "workload"] + [f"{t} {d}" for _, t, _ in COST for d in ("C", "ours", "ours/C")], costrows)
    csv("compare", ["feature_persistent", "workload", "driver", "unit", "n", "min", "median", "max", "mbps_median", "dom0_notifs_per_req_median",
                    "own_notifs_per_req_median"] + [f"{m}_median" for m, _, _ in COST] + ["paired_ratio_median"], csvrows)
    gnuplot("compare", "set title 'Xen: ours relative to C xen-blkfront (median, min-max bars)'\nset style data histogram\n"
            "set style histogram errorbars gap 1 lw 1\nset style fill solid 0.6 border -1\nset xtics rotate by -30\nset ylabel 'relative to C (C median = 1)'\nset yrange [0:*]\n"
            "plot 'DAT' using 2:3:4:xtic(1) title 'C xen-blkfront', '' using 5:6:7 title 'ours'\n", dat)

# ---- 6. calib: compare's A/A run (C on both vbds) --------------------------------
if "calib" in cfg["exps"]:
    rows, csvrows = [], []
    for pers in cfg["persistent"]:
        for wl in cfg["cwl"]:
            title, metric = COMPARE_WL[wl]
            w = {"exp": "calib", "persistent": str(pers), "wl": wl}
            for drv in ("a", "b"):
                point({**w, "driver": drv}, metric, label=f"calib p={pers} {drv} {wl}", reps=cfg["compare_reps"])
            pr = paired({**w, "driver": "b"}, {**w, "driver": "a"}, metric)
            rows.append([pers, title, metric, rng(pr, 2), gm(pr)])
            csvrows.append([pers, wl, metric] + mmm(pr) + [gm(pr)])
    table(f"Calibration (A/A): C xen-blkfront on both vbds, measured like compare; xvdb/xvda per repetition, median [min-max] and geometric mean of {cfg['compare_reps']}. "
          "An ours/C inside this spread is not a difference the method can see",
          ["feature_persistent", "workload", "unit", "b/a paired", "geomean"], rows)
    csv("calib", ["feature_persistent", "workload", "unit", "n", "min", "median", "max", "geomean"], csvrows)

# ---- 7. profile: where the domU's CPU time goes -----------------------------------
if "profile" in cfg["exps"]:
    RUN = re.compile(r"PROFILE-RUN (\w+) wl=(\w+) (\S+) (\S+) (\S+) reqs=(\d+) \(whole fio run; samples: (\d+) s")
    BUSY = re.compile(r"PROFILE-BUSY (\w+) (\w+) (\d+) in_driver_module=(\d+)")
    LEAF = re.compile(r"PROFILE-LEAF (\w+) (\w+) (\d+) (\S+)")
    DRV = re.compile(r"PROFILE-DRV (\w+) (\w+) (\d+) (\S+)")
    runs, leaves, rows, where = [], {}, [], {}

    demangled = {}

    def short(sym):
        """A Rust symbol demangled (c++filt), without crate names and hashes."""
        if not sym.startswith("_R") or not shutil.which("c++filt"):
            return sym
        if sym not in demangled:
            r = subprocess.run(["c++filt", sym], capture_output=True, text=True)
            demangled[sym] = re.sub(r"xen_blkfront(_rs)?\[[0-9a-f]+\]::", "", r.stdout.strip()) or sym
        return demangled[sym]
    # A boot of its own (bench-xen-profile), or the smoke run's compare boot.
    for log in sorted(glob.glob(os.path.join(out, "logs", "bench-xen-*.log"))):
        for raw in open(log, errors="replace"):
            line = raw.replace("\r", "")
            if m := RUN.search(line):
                runs.append({"drv": m.group(1), "wl": m.group(2), "bw": num(m.group(4)), "iops": num(m.group(5)),
                             "reqs": int(m.group(6)), "sampled": int(m.group(7))})
            elif (m := BUSY.search(line)) and runs:
                runs[-1].update(busy=int(m.group(3)), drv_mod=int(m.group(4)))
            elif (m := LEAF.search(line)) and runs:
                per = leaves.setdefault((m.group(2), m.group(1)), {})
                per[m.group(4)] = per.get(m.group(4), 0) + int(m.group(3))
            elif (m := DRV.search(line)) and runs:
                leaf, _, frame = m.group(4).partition("@")
                key = f"{short(leaf)} @ {short(frame)}"
                per = where.setdefault((m.group(2), m.group(1)), {})
                per[key] = per.get(key, 0) + int(m.group(3))
                runs[-1]["drv_where"] = runs[-1].get("drv_where", 0) + int(m.group(3))
    for i, r in enumerate(runs):
        if "busy" not in r or r["bw"] is None or not r["reqs"]:
            problems.append(f"profile run {i + 1} ({r['drv']}): incomplete")
            continue
        # Requests in the sampled window (fio ran RT s, perf RT-2 of them).
        rt = cfg["runtime"] if cfg["runtime"] > r["sampled"] else r["sampled"] + 2
        r["q"] = q = r["reqs"] * r["sampled"] / rt
        rows.append([i + 1, r["wl"], r["drv"], f"{r['bw'] * 1.024 / 1000:.1f}", int(r["iops"] or 0), r["reqs"], r["busy"], f"{r['busy'] / 1999 * 1e6 / q:.1f}",
                     r["drv_mod"], f"{100 * r['drv_mod'] / r['busy']:.1f}" if r["busy"] else "-"])
    want = 2 * cfg.get("profile_pairs", 2) * len(cfg.get("pwl", ["seqread"]))
    if len(rows) < want:
        problems.append(f"profile: {len(rows)} of {want} runs")
    header = ["run", "workload", "driver", "MB/s", "IOPS", "requests", "busy samples", "sampled CPU us/req", "in driver", "in driver %"]
    table("Profile (perf cpu-clock 1999 Hz in the domU, idle loop excluded), persistent grants off; "
          "'in driver' = samples with a frame of the driver module on the stack", header, rows)
    csv("profile", [h.replace(" ", "_").replace("/", "_per_").replace("%", "pct") for h in header], rows)
    # Pooled over the runs of a workload, and ours/C per pair (a C run and
    # the ours run after it): one run's samples are too few to compare, and
    # the host's pace drifts between runs (the same driver's busy samples
    # per request differ up to 4x from one run to the next).
    done = [r for r in runs if "q" in r]
    prow, pcsv = [], []
    for wl in cfg.get("pwl", ["seqread"]):
        pool, per_run = {}, {"c": [], "rs": []}
        for r in done:
            if r["wl"] != wl:
                continue
            t = pool.setdefault(r["drv"], [0, 0, 0.0])
            t[0] += r["busy"]
            t[1] += r["drv_mod"]
            t[2] += r["q"]
            per_run[r["drv"]].append(r)
        if not all(k in pool and pool[k][2] for k in ("c", "rs")):
            continue
        us = {k: pool[k][1] / 1999 * 1e6 / pool[k][2] for k in pool}
        share = {k: 100 * pool[k][1] / pool[k][0] if pool[k][0] else 0 for k in pool}
        pairs = [(rs["drv_mod"] / rs["q"]) / (c["drv_mod"] / c["q"])
                 for c, rs in zip(per_run["c"], per_run["rs"]) if c["drv_mod"] and rs["drv_mod"]]
        pr = (min(pairs), statistics.median(pairs), max(pairs), len(pairs), statistics.geometric_mean(pairs)) if pairs else None
        prow.append([wl, len(per_run["c"]), f"{us['c']:.1f}", f"{us['rs']:.1f}", f"{us['rs'] / us['c']:.2f}" if us["c"] else "-",
                     rng(pr, 2), gm(pr), f"{share['c']:.1f}", f"{share['rs']:.1f}"])
        pcsv.append([wl, len(per_run["c"]), f"{us['c']:.2f}", f"{us['rs']:.2f}"] + mmm(pr) + [gm(pr), f"{share['c']:.2f}", f"{share['rs']:.2f}"])
    table("Profile pooled: samples with a driver frame per request (as us of CPU), both drivers; ours/C per pair of runs, median [min-max] and geometric mean",
          ["workload", "pairs", "C in-driver us/req", "ours in-driver us/req", "ours/C pooled", "ours/C paired", "paired geomean", "C in driver %", "ours in driver %"], prow)
    csv("profile-pooled", ["workload", "pairs", "c_in_driver_us_per_req", "rs_in_driver_us_per_req", "n", "min", "median", "max", "geomean", "c_in_driver_pct", "rs_in_driver_pct"], pcsv)
    # Every in-driver sample by leaf and the driver's innermost frame, per
    # 10,000 requests of the sampled windows pooled (logs from before the
    # PROFILE-DRV lines have none: no table).
    for wl in cfg.get("pwl", ["seqread"]):
        q = {d: sum(r["q"] for r in done if r["wl"] == wl and r["drv"] == d) for d in ("c", "rs")}
        if not all(q.values()) or not any((wl, d) in where for d in q):
            continue
        wrows = []
        for d in ("c", "rs"):
            per = where.get((wl, d), {})
            for k, n in sorted(per.items(), key=lambda kv: -kv[1])[:10]:
                wrows.append([d, k, n, f"{1e4 * n / q[d]:.1f}"])
        table(f"Profile: in-driver samples of {wl} by leaf @ the driver's innermost frame (all runs pooled; top 10 each)",
              ["driver", "leaf @ driver frame", "samples", "per 10k requests"], wrows)
    for i, r in enumerate(runs):
        if "drv_where" in r and r["drv_where"] != r.get("drv_mod"):
            problems.append(f"profile run {i + 1}: PROFILE-DRV lines sum to {r['drv_where']}, not in_driver_module={r.get('drv_mod')}")
    for (wl, drv), per in sorted(leaves.items()):
        top = sorted(per.items(), key=lambda kv: -kv[1])[:8]
        table(f"Profile: top leaf functions, {wl}, {drv} (busy samples, both runs)", ["samples", "function"], [[n, k] for k, n in top])

if shutil.which("gnuplot"):
    for name in plots:
        r = subprocess.run(["gnuplot", os.path.join(out, name + ".gp")], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"warning: gnuplot {name}: {r.stderr.strip()[:300]}", file=sys.stderr)
else:
    print("warning: gnuplot not installed: no PNGs (apt-get install gnuplot-nox)", file=sys.stderr)

if late:
    print(f"note: in multi-domU runs up to {late} step(s) of a domU started after their common slot (less overlap)")
print(f"\nresults: {out} (CSV, PNG, logs/)")
for p in problems:
    print(f"MISSING: {p}")
sys.exit(1 if problems else 0)
