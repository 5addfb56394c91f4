"""The table kwker.report() prints: what ran where, per op."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def render(stats: dict) -> str:
    """stats: kwker.stats()."""
    if not stats:
        return "kwker: no calls to patched functions were counted"
    timed = any("time_s" in row for row in stats.values())
    header = ["op", "fast", "torch", "torch calls by reason"]
    if timed:
        header += ["fast ms", "torch ms"]
    rows = []
    total_fast = total_torch = 0
    for op, row in stats.items():
        fallback = sum(row["fallback"].values())
        total_fast += row["fast"]
        total_torch += fallback
        reasons = ", ".join(f"{key} {n}" for key, n in
                            sorted(row["fallback"].items(), key=lambda kv: -kv[1])) or "-"
        line = [op, str(row["fast"]), str(fallback), reasons]
        if timed:
            times = row.get("time_s")
            line += [_ms(times["fast"]), _ms(times["fallback"])] if times else ["-", "-"]
        rows.append(line)
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]

    def fmt(cells):
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.ljust(widths[i]) if i in (0, 3) else cell.rjust(widths[i]))
        return "  ".join(out).rstrip()

    lines = ["kwker: calls to patched functions", fmt(header),
             "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    lines.append(f"total: {total_fast} fast, {total_torch} to torch")
    if not timed:
        lines.append("(times: install(timing=True), KWKER_TIMING=1 or python -m kwker --report)")
    return "\n".join(lines)
