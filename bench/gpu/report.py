"""The check's report: markdown tables as they are printed, a per-model summary, and ``gpu_report.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path


class Report:
    """Tables in the order they were printed, a per-model summary, and the JSON file rewritten after each table
    (so a run cut short by its timeout still leaves what it measured)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.data: dict = {"summary": {}}

    def model(self, key: str) -> dict:
        return self.data["summary"].setdefault(key, {})

    def table(self, title: str, header: list[str], rows: list[list]) -> None:
        print(f"\n### {title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(_cell(v) for v in row) + " |", flush=True)
        self.data[title] = [dict(zip(header, row)) for row in rows]
        self.save()

    def save(self) -> None:
        if self.path is not None:
            self.path.write_text(json.dumps(self.data, indent=2, default=float), encoding="utf-8")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.4g}"
    return str(value)


REPORT = Report()


def summary() -> None:
    rows = []
    for key, entry in REPORT.data["summary"].items():
        fp32, bf16 = entry.get("fp32", {}), entry.get("bf16", {})
        diff = entry.get("bf16_vs_fp32", {})
        rows.append(
            [
                key,
                entry.get("unit", ""),
                _best(fp32),
                _best(bf16),
                fp32.get("peak_mib_at_32", math.nan),
                bf16.get("peak_mib_at_32", math.nan),
                diff.get("max_abs", math.nan),
                diff.get("uint8_max_levels", math.nan),
                entry.get("load_ms", math.nan),
                entry.get("first_forward_ms", math.nan),
                "; ".join(f"{k}: {why} at {batch}" for k, (why, batch) in entry.get("failed_at_batch", {}).items())
                or "—",
            ]
        )
    header = ["model", "unit", "fp32 best (batch)", "bf16 best (batch)", "peak MiB fp32 @32", "peak MiB bf16 @32"]
    header += ["bf16 max abs", "bf16 max uint8", "load ms", "load+first ms", "stopped"]
    REPORT.table("Summary", header, rows)
    print("\nSUMMARY_JSON " + json.dumps(REPORT.data["summary"], default=float), flush=True)


def _best(entry: dict) -> str:
    return f"{entry['best_per_s']:.4g} ({entry['at_batch']}, {entry['layout']})" if entry else "—"
