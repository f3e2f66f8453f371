#!/usr/bin/env python3
"""Draws the CSV of fairsem_bench_tenant_shares --csv as an SVG: each tenant's share of the held
unit-time, second by second, beside its target (weight / sum of weights) and a band of +-5
percentage points around it. Standard library only.

    python3 tests/bench/tenant_shares_plot.py shares.csv docs/img/tenant_shares.svg
"""
import csv
import re
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
W, H = 800, 360
LEFT, RIGHT, TOP, BOTTOM = 60, 210, 30, 45


def main(source, target):
    with open(source, newline="") as f:
        rows = list(csv.DictReader(f))
    columns = [c for c in rows[0] if c.startswith("share_")]
    tenants = []
    for c in columns:
        m = re.fullmatch(r"share_(.*)_w(\d+)", c)
        tenants.append((c, m.group(1), int(m.group(2))))
    total_weight = sum(w for _, _, w in tenants)
    seconds = [int(r["second"]) for r in rows]
    top_share = 0.7
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(s):
        return LEFT + plot_w * (s - seconds[0]) / max(1, seconds[-1] - seconds[0])

    def y(share):
        return TOP + plot_h * (1 - share / top_share)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{LEFT}" y="18" font-size="14">Share of held unit-time per second, '
           f'weights {":".join(str(w) for _, _, w in tenants)}</text>']
    for i in range(0, 8):
        share = i / 10
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(share):.1f}" '
                   f'y2="{y(share):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(share) + 4:.1f}" text-anchor="end">'
                   f'{share:.0%}</text>')
    step = 5 if seconds[-1] > 10 else 1
    for s in seconds:
        if s % step == 0 or s == seconds[0]:
            out.append(f'<text x="{x(s):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                       f'{s}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{H - 8}" text-anchor="middle">second</text>')
    for i, (column, name, weight) in enumerate(tenants):
        colour = COLOURS[i % len(COLOURS)]
        goal = weight / total_weight
        out.append(f'<rect x="{LEFT}" y="{y(goal + 0.05):.1f}" width="{plot_w}" '
                   f'height="{y(goal - 0.05) - y(goal + 0.05):.1f}" fill="{colour}" '
                   f'fill-opacity="0.08"/>')
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(goal):.1f}" y2="{y(goal):.1f}" '
                   f'stroke="{colour}" stroke-dasharray="4 3" stroke-opacity="0.7"/>')
        points = " ".join(f"{x(s):.1f},{y(float(r[column])):.1f}" for s, r in zip(seconds, rows))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"/>')
        mean = sum(float(r[column]) for r in rows) / len(rows)
        ly = TOP + 20 + 36 * i
        out.append(f'<line x1="{W - RIGHT + 12}" x2="{W - RIGHT + 32}" y1="{ly}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{W - RIGHT + 38}" y="{ly + 4}">{name}, weight {weight}</text>')
        out.append(f'<text x="{W - RIGHT + 38}" y="{ly + 19}" fill="#555">target {goal:.0%}, '
                   f'mean {mean:.1%}</text>')
    ly = TOP + 20 + 36 * len(tenants)
    out.append(f'<text x="{W - RIGHT + 12}" y="{ly + 4}" fill="#555">dashed: target;</text>')
    out.append(f'<text x="{W - RIGHT + 12}" y="{ly + 19}" fill="#555">band: target ±5 points</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
               f'stroke="#999"/>')
    out.append("</svg>")
    with open(target, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} SHARES.csv OUT.svg")
    main(sys.argv[1], sys.argv[2])
