"""The figures, table and plot of :mod:`.collectives_jobs`, from its saved runs.

Kept apart so they can be recomputed from any ``results.json`` without a network:
``figures(json.load(f)["runs"])``.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet_scenarios.bench.collectives_report import MODE_COLORS

TARGET = 0.90  # docs/benchmarks.md §2: every job's busbw in the mix >= 0.90 of alone (loom)
MODE_ORDER = ("ecmp", "loom")
MIX_ORDER = ("4x4", "2x8")


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


# --------------------------------------------------------------------------- mixes


def crowded_links(rec: dict[str, Any]) -> dict[str, list[str]]:
    """``"s1>s2" -> ["job:src>dst", ...]`` for every fabric link that Loom's placement of
    the run's jobs (their ``paths``, registered runs only) gives more than one ring pair:
    every pair of a ring wants the whole link, so two on one link halve each other."""
    on: dict[str, list[str]] = {}
    for job in rec.get("jobs", []):
        for path in (job.get("loom") or {}).get("paths") or []:
            hops = path.get("switches", [])
            pair = f"{job['name']}:{path['src']}>{path['dst']}"
            for a, b in itertools.pairwise(hops):
                on.setdefault(f"{a}>{b}", []).append(pair)
    return {link: pairs for link, pairs in sorted(on.items()) if len(pairs) > 1}


def job_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per job of every mix run that finished."""
    rows = []
    for rec in runs:
        if rec.get("kind") != "mix" or "jobs" not in rec:
            continue
        crowded = crowded_links(rec)
        for job in rec["jobs"]:
            shared = sorted(
                {
                    p.split(":", 1)[0]
                    for pairs in crowded.values()
                    if any(x.startswith(f"{job['name']}:") for x in pairs)
                    for p in pairs
                }
                - {job["name"]}
            )
            rows.append(
                {
                    "mode": rec["mode"],
                    "mix": rec["mix"],
                    "seed": rec["seed"],
                    "name": job["name"],
                    "tenant": job["tenant"],
                    "hosts": job["hosts"],
                    "alone_busbw_mbps": job["alone_busbw_mbps"],
                    "alone_over_link": job["alone_over_link"],
                    "mix_busbw_mbps": job["mix_busbw_mbps"],
                    "mix_over_link": None
                    if job["mix_busbw_mbps"] is None
                    else job["mix_busbw_mbps"] / job["alone"]["link_mbps"],
                    "ratio": job["ratio"],
                    "startup_s": job["mix"]["startup_s"],
                    "alone_retrans_bytes": job["alone"]["tcp_retrans_bytes"],
                    "mix_retrans_bytes": job["mix"]["tcp_retrans_bytes"],
                    "crowded_links": sum(
                        any(x.startswith(f"{job['name']}:") for x in pairs)
                        for pairs in crowded.values()
                    ),
                    "shares_with": shared,
                }
            )
    return rows


def mix_figures(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``mix -> mode -> {ratios, min, median, max, at_target, mix_over_link_min}``: every
    job's busbw in the mix / alone, over all seeds, and the slowest job's busbw in the mix
    / link rate (a ratio near 1 says nothing of a job that is slow alone)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    rows = job_rows(runs)
    for mix in dict.fromkeys([*MIX_ORDER, *(r["mix"] for r in rows)]):
        for mode in MODE_ORDER:
            mine = [r for r in rows if r["mix"] == mix and r["mode"] == mode]
            if not mine:
                continue
            ratios = [r["ratio"] for r in mine if r["ratio"] is not None]
            speeds = [r["mix_over_link"] for r in mine if r["mix_over_link"] is not None]
            out.setdefault(mix, {})[mode] = {
                "ratios": ratios,
                "jobs": len(mine),
                "min": min(ratios) if ratios else None,
                "median": _median(ratios),
                "max": max(ratios) if ratios else None,
                "at_target": sum(x >= TARGET for x in ratios),
                "mix_over_link_min": min(speeds) if speeds else None,
            }
    return out


# --------------------------------------------------------------------------- churn


def _drops(classes: dict[str, Any], label: str) -> int | None:
    c = classes.get(label, {}).get("collective")
    return None if c is None else int(c.get("dropped", 0))


def churn_figures(rec: dict[str, Any]) -> dict[str, Any]:
    """The churn's figures: per long job its median busbw before the first arrival, its
    worst iteration from then on (and where), their ratio; the long jobs' retransmitted
    bytes per iteration before, during the arrivals (iterations overlapping an arriving
    job's span) and in the gaps; collective-class drops before and during."""
    arrivals = [m[0] for m in rec["marks"]]
    per_job: dict[str, dict[str, Any]] = {}
    retrans: dict[str, list[int]] = {"before": [], "during": [], "gaps": []}
    for name, r in rec["long"].items():
        labels, bus = rec["labels"][name], r["busbw_mbps"]
        before = [b for b, lab in zip(bus, labels, strict=True) if lab == "before"]
        later = [(b, lab) for b, lab in zip(bus, labels, strict=True) if lab != "before"]
        during = [b for b, lab in later if lab in arrivals]
        med = _median(before)
        worst = min(later) if later else None
        per_job[name] = {
            "iterations": len(bus),
            "median_before": med,
            "median_during": _median(during),
            "worst": worst[0] if worst else None,
            "worst_at": worst[1] if worst else None,
            "worst_over_before": worst[0] / med if worst and med else None,
            "link_mbps": r["link_mbps"],
        }
        for x, lab in zip(r.get("retrans_iter") or [], labels, strict=False):
            retrans[
                "before" if lab == "before" else "during" if lab in arrivals else "gaps"
            ].append(x)
    ratios = [
        j["worst_over_before"] for j in per_job.values() if j["worst_over_before"] is not None
    ]
    classes = rec.get("classes", {})
    during = [_drops(classes, a) for a in arrivals]
    first = rec["marks"][0][1] if rec["marks"] else rec["end_at"]
    return {
        "per_job": per_job,
        "worst_over_before": min(ratios) if ratios else None,
        "retrans_before_per_iter": _mean(retrans["before"]),
        "retrans_during_per_iter": _mean(retrans["during"]),
        "retrans_gaps_per_iter": _mean(retrans["gaps"]),
        "drops_before": _drops(classes, "before"),
        "drops_during": None if None in during else sum(d or 0 for d in during),
        "before_s": first - rec["go_at"],
        "during_s": sum(m[2] - m[1] for m in rec["marks"]),
        "arrivals": {
            name: {"busbw_mbps": _median(a["busbw_mbps"]), "link_mbps": a["link_mbps"]}
            for name, a in rec["arrivals"].items()
        },
    }


def figures(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"mixes": mix_figures, "churn": mode -> churn_figures}`` of the finished runs."""
    churn = {r["mode"]: churn_figures(r) for r in runs if r.get("kind") == "churn" and "long" in r}
    return {"mixes": mix_figures(runs), "churn": churn}


# --------------------------------------------------------------------------- table, plot


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def table(doc: dict[str, Any]) -> str:
    figs = figures(doc["runs"])
    lines = [
        f"every job's busbw in the mix / alone (target: every job >= {TARGET:.2f} in loom)",
        f"{'mix':<6}{'mode':<7}{'jobs':>5}{'min':>8}{'median':>8}{'max':>8}  >= target"
        "  slowest job in the mix / link",
    ]
    for mix, modes in figs["mixes"].items():
        for mode, f in modes.items():
            lines.append(
                f"{mix:<6}{mode:<7}{f['jobs']:>5}{_f(f['min']):>8}{_f(f['median']):>8}"
                f"{_f(f['max']):>8}  {f['at_target']}/{f['jobs']:<8}"
                f"{_f(f['mix_over_link_min']):>8}"
            )
    if figs["churn"]:
        lines += ["", "churn: two long jobs while two others arrive and leave"]
        lines.append(
            f"{'mode':<7}{'worst/median before':>21}{'retrans kB/iter before':>24}"
            f"{'during':>8}{'gaps':>8}{'coll. drops before':>20}{'during':>8}"
        )
        for mode, c in figs["churn"].items():
            kb = [
                c[k] / 1e3 if c[k] is not None else None
                for k in (
                    "retrans_before_per_iter",
                    "retrans_during_per_iter",
                    "retrans_gaps_per_iter",
                )
            ]
            lines.append(
                f"{mode:<7}{_f(c['worst_over_before']):>21}{_f(kb[0], '.0f'):>24}"
                f"{_f(kb[1], '.0f'):>8}{_f(kb[2], '.0f'):>8}"
                f"{'-' if c['drops_before'] is None else c['drops_before']:>20}"
                f"{'-' if c['drops_during'] is None else c['drops_during']:>8}"
            )
            for name, j in c["per_job"].items():
                lines.append(
                    f"  {name}: median before {_f(j['median_before'], '.2f')} Mbit/s, worst"
                    f" {_f(j['worst'], '.2f')} ({j['worst_at']}), {j['iterations']} iterations"
                )
    lines += [
        "",
        f"{'mode':<6}{'mix':<5}{'job':<15}{'tenant':<7}{'alone Mbit/s':>13}"
        f"{'/link':>7}{'mix Mbit/s':>11}{'ratio':>7}{'retrans MB':>11}  crowded (Loom)  hosts",
    ]
    for r in job_rows(doc["runs"]):
        shared = f" with {','.join(r['shares_with'])}" if r["shares_with"] else ""
        lines.append(
            f"{r['mode']:<6}{r['mix']:<5}{r['name']:<15}{r['tenant']:<7}"
            f"{r['alone_busbw_mbps']:>13.2f}{r['alone_over_link']:>7.3f}"
            f"{_f(r['mix_busbw_mbps'], '.2f'):>11}{_f(r['ratio']):>7}"
            f"{r['mix_retrans_bytes'] / 1e6:>11.2f}"
            f"  {r['crowded_links']:>2}{shared:<12}"
            f"  {' '.join(r['hosts'])}"
        )
    for rec in doc["runs"]:
        if "error" in rec:
            lines.append(f"{rec['key']}: FAILED {rec['error'][:100]}")
    return "\n".join(lines)


def plot(doc: dict[str, Any], out: Path) -> Path | None:
    """Per-job ratios (bars per mix and mode, the target line) and, per mode, the churn's
    long-job iterations over time with the arrivals shaded (matplotlib, Agg)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in job_rows(doc["runs"]) if r["ratio"] is not None]
    churns = [r for r in doc["runs"] if r.get("kind") == "churn" and "long" in r]
    if not rows and not churns:
        return None
    fig, axes = plt.subplots(1, 1 + len(churns), figsize=(6.5 + 4.5 * len(churns), 4.6))
    axes = list(axes) if len(churns) else [axes]
    ax = axes[0]
    x, ticks, labels = 0.0, [], []
    shown: set[str] = set()
    for mix in dict.fromkeys([*MIX_ORDER, *(r["mix"] for r in rows)]):
        for mode in MODE_ORDER:
            mine = [r for r in rows if r["mix"] == mix and r["mode"] == mode]
            if not mine:
                continue
            xs = [x + i * 0.8 / len(mine) for i in range(len(mine))]
            ax.bar(
                xs,
                [r["ratio"] for r in mine],
                0.7 / len(mine),
                color=MODE_COLORS[mode],
                label=mode if mode not in shown else None,
                align="edge",
            )
            speed = [r["mix_over_link"] for r in mine]
            mark = "in the mix / link" if "speed" not in shown else None
            ax.plot([x + 0.35 / len(mine) for x in xs], speed, "kD", ms=4, label=mark)
            shown.update((mode, "speed"))
            ticks.append(x + 0.4)
            labels.append(f"{mix}\n{mode}")
            x += 1.0
        x += 0.4
    if rows:
        ax.axhline(TARGET, color="#c53030", linestyle="--", linewidth=1, label="target")
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylim(0, 1.3)
    ax.set_ylabel("busbw in the mix / alone (bars)")
    ax.set_title("every job of each mix: one bar each", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper center", ncol=4)
    for ax, rec in zip(axes[1:], churns, strict=True):
        t0 = rec["go_at"]
        for name, r in rec["long"].items():
            mids = [(a + b) / 2 - t0 for a, b in r["iter_wall"]]
            ax.plot(mids, [b / r["link_mbps"] for b in r["busbw_mbps"]], "o-", ms=3, label=name)
        for name, a, b in rec["marks"]:
            ax.axvspan(a - t0, b - t0, color="#f6ad55", alpha=0.25)
            ax.text((a + b) / 2 - t0, 1.12, name.rsplit("-", 1)[-1], ha="center", fontsize=8)
        ax.set_ylim(0, 1.2)
        ax.set_xlabel("seconds since the long jobs started")
        ax.set_ylabel("busbw / link per iteration")
        ax.set_title(f"churn, {rec['mode']}: arrivals shaded", fontsize=10)
        ax.legend(fontsize=8, frameon=False, loc="lower left")
    a = doc["args"]
    fig.suptitle(
        f"gloo all-reduce jobs at once, k=4 fat-tree, {a['mib']:g} MiB, {a['rate']:g} Mbit/s,"
        f" MTU {a.get('mtu', 1500)}" + (": plain fabric" if doc.get("plain") else ""),
        fontsize=10,
    )
    fig.tight_layout()
    path = out / "collectives_jobs.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
