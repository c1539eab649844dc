"""The what-if prediction's table and plot, from its ``results.json`` document.

Kept apart from :mod:`.whatif` so a saved prediction can be redrawn without the core:
``plot(json.load(f), Path("whatif.png"))``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MODE_COLOR = {"ecmp": "tab:orange", "loom": "tab:blue"}
MAX_ROWS = 40  # jobs listed one per line; more are summarised


def _fig(s: dict[str, float]) -> str:
    if s["max"] - s["min"] < 5e-4:
        return f"{s['mean']:.2f}"
    return f"{s['mean']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def table(doc: dict[str, Any]) -> str:
    """Per mode: each job's busbw / link (mean and min-max over hash draws) and its
    bottleneck link, then the link utilisation and the jobs summarised."""
    f, modes = doc["fabric"], doc["modes"]
    lines = [
        f"{f['name']}: {f['switches']} switches, {f['hosts']} hosts; jobs {doc['jobs_spec']},"
        f" ranks in {doc['order']} order (seed {doc['seed']}), {doc['bulk']} bulk flows",
        "draws: " + ", ".join(f"{m} {r['draws']}" for m, r in modes.items()),
        "predicted busbw / link (max-min fair; mean (min-max) over hash draws), bottleneck link",
    ]
    head = f"{'job':<9}{'op':<11}{'ranks':>6}"
    for m in modes:
        head += f"  {m + ' busbw/link':<22}{m + ' bottleneck':<24}"
    lines.append(head)
    jobs = doc["jobs"]
    for job in jobs[:MAX_ROWS]:
        row = f"{job['name']:<9}{job['op']:<11}{job['ranks']:>6}"
        for r in modes.values():
            j = r["jobs"][job["name"]]
            row += f"  {_fig(j):<22}{j['bottleneck']:<24}"
        lines.append(row)
    if len(jobs) > MAX_ROWS:
        lines.append(f"... {len(jobs) - MAX_ROWS} more jobs in results.json")
    lines.append("")
    for m, r in modes.items():
        means = [r["jobs"][j["name"]]["mean"] for j in jobs]
        lines.append(
            f"{m}: jobs' busbw/link mean {sum(means) / len(means):.3f}, worst job"
            f" {min(means):.3f}; link utilisation max {_fig(r['max_utilization'])},"
            f" mean {_fig(r['mean_utilization'])} over {r['links']} directed links"
            + (f"; bulk flows/link {_fig(r['bulk_over_link'])}" if r.get("bulk_over_link") else "")
            + f"; {r['flows']} flows traced in {r['trace_wall_s']:.1f} s"
        )
        if "register_core_s" in r:
            lines.append(
                f"{m}: {len(jobs)} jobs registered in {r['register_core_s']:.1f} s of core time"
                + (
                    f", the longest {r['register_core_max_s']:.2f} s"
                    if "register_core_max_s" in r
                    else ""
                )
            )
    lines.append(
        f"bring-up: core {f['bringup_core_s']:.1f} s, wall {f['bringup_wall_s']:.1f} s;"
        f" {f['rules_installed']} rules"
    )
    return "\n".join(lines)


def check_table(doc: dict[str, Any]) -> str:
    """Predicted beside measured for the collectives benchmark's k=4 scenarios."""
    ceiling = doc["tcp_ceiling"]
    lines = [
        "k=4 fat-tree, the collectives benchmark's scenarios: busbw / link rate",
        f"predicted: max-min fair model on the traced paths, raw and x {ceiling:.3f}"
        f" (the HTB+TCP ceiling at MTU {doc['mtu']}); measured: "
        + (doc["measured_from"] or "none given (--measured results.json)"),
        f"{'scenario':<20}{'mode':<6}{'predicted':>22}{'x ceiling':>11}{'measured':>10}"
        f"  bottleneck",
    ]
    for r in doc["rows"]:
        s = {"mean": r["predicted"], "min": r["predicted_min"], "max": r["predicted_max"]}
        meas = "-" if r["measured"] is None else f"{r['measured']:.2f}"
        lines.append(
            f"{r['scenario']:<20}{r['mode']:<6}{_fig(s):>22}{r['predicted_scaled']:>11.2f}"
            f"{meas:>10}  {r['bottleneck']}"
        )
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Per job busbw / link by mode (bars: min-max over draws); the distribution of link
    utilisation by mode (every directed link, over every draw)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes, jobs = doc["modes"], doc["jobs"]
    if not modes or not jobs:
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    width = 0.8 / len(modes)
    for k, (m, r) in enumerate(modes.items()):
        xs = [i + (k - (len(modes) - 1) / 2) * width for i in range(len(jobs))]
        figs = [r["jobs"][j["name"]] for j in jobs]
        ys = [s["mean"] for s in figs]
        err = [[s["mean"] - s["min"] for s in figs], [s["max"] - s["mean"] for s in figs]]
        color = MODE_COLOR.get(m, "tab:gray")
        ax.bar(xs, ys, width, yerr=err, color=color, label=m, capsize=2 if len(jobs) < 20 else 0)
    ax.set_xlabel("job")
    ax.set_ylabel("predicted busbw / link rate")
    ax.set_ylim(0, 1.1)
    ax.set_title(f"{doc['fabric']['name']}, jobs {doc['jobs_spec']}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    for m, r in modes.items():
        hist = r["utilization_hist"]
        total = sum(hist)
        bins = len(hist) - 1
        xs, ys, acc = [0.0], [hist[0] / total], hist[0]
        for i, n in enumerate(hist[1:], start=1):
            acc += n
            xs.append(i / bins)
            ys.append(acc / total)
        bx.step(xs, ys, where="post", color=MODE_COLOR.get(m, "tab:gray"), label=m)
    bx.set_xlabel("link utilisation")
    bx.set_ylabel("share of directed links at or below")
    bx.set_title("Link utilisation (every directed link, every draw)", fontsize=10)
    bx.legend(fontsize=8)
    bx.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_check(doc: dict[str, Any], path: Path) -> Path | None:
    """Predicted (x ceiling, min-max over draws) beside measured, per scenario and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    if not rows:
        return None
    ceiling = doc["tcp_ceiling"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels = [f"{r['scenario']}\n{r['mode']}" for r in rows]
    xs = list(range(len(rows)))
    ys = [r["predicted_scaled"] for r in rows]
    err = [
        [(r["predicted"] - r["predicted_min"]) * ceiling for r in rows],
        [(r["predicted_max"] - r["predicted"]) * ceiling for r in rows],
    ]
    ax.bar([x - 0.2 for x in xs], ys, 0.4, yerr=err, capsize=3, label="predicted x ceiling")
    measured = [(x, r["measured"]) for x, r in zip(xs, rows, strict=True) if r["measured"]]
    if measured:
        ax.bar([x + 0.2 for x, _ in measured], [m for _, m in measured], 0.4, label="measured")
    ax.set_xticks(xs, labels, fontsize=7)
    ax.set_ylabel("busbw / link rate")
    ax.set_ylim(0, 1.1)
    ax.set_title("k=4 fat-tree: predicted vs measured (collectives benchmark)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def save(out: Path, doc: dict[str, Any], text: str, png: Path | None) -> str:
    """``results.json`` and ``table.txt`` in ``out``; returns the line that says where."""
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    (out / "table.txt").write_text(text + "\n")
    return f"results: {out / 'results.json'}" + (f", {png}" if png else "")
