"""``hta-lite findings TRACE_DIR [--json] [--snapshot FILE]``: what to fix first, ranked by the
step time each fix would save (``TraceAnalysis.get_findings``), with the evidence and what to
try."""

from __future__ import annotations

import argparse
import json


def add_parser(sub, common) -> None:
    cmd = sub.add_parser(
        "findings", help="what to fix first, ranked by the step time each fix would save"
    )
    cmd.add_argument("trace_dir")
    cmd.add_argument("--json", action="store_true", help="the findings table as JSON records")
    cmd.add_argument(
        "--snapshot",
        help="a CUDA memory snapshot of the run (torch.cuda.memory._dump_snapshot): its"
        " fragmentation and out-of-memory verdicts join the findings",
    )
    common(cmd)


def run(args: argparse.Namespace, load) -> int:
    table = load(args).get_findings(snapshot=args.snapshot)
    if args.json:
        print(json.dumps(json.loads(table.to_json(orient="records")), indent=1))
        return 0
    for line in finding_lines(table, detail=True) + caveat_lines(table):
        print(line)
    return 0


def finding_lines(table, detail: bool = False) -> list[str]:
    """One numbered line per finding (its saving, range and where), with the evidence and the
    advice under it when ``detail``; a sentence when there is none."""
    if table.empty:
        return [table.attrs.get("why") or "No fix would save 0.5 % of the step or more."]
    lines = []
    for n, row in enumerate(table.itertuples(index=False), 1):
        rank = "" if row.rank is None or str(row.rank) == "<NA>" else f" (rank {row.rank})"
        if row.saving_ms_per_step > 0:
            saving = (
                f"saves ~{row.saving_ms_per_step:.2f} ms per step ({row.saving_pctg:.1f} %;"
                f" {row.saving_low_ms:.2f}-{row.saving_high_ms:.2f} ms; with those above:"
                f" {row.cumulative_ms:.2f} ms)"
            )
        else:
            saving = "no step time"
        lines.append(f"{n}. {row.kind}{rank}: {row.where} — {saving}")
        if detail:
            lines += [f"   evidence: {row.evidence}", f"   estimate: {row.estimate_method}",
                      f"   try: {row.advice}"]  # fmt: skip
    return lines


def caveat_lines(table) -> list[str]:
    """What the findings' numbers rest on, where the table says (``attrs["caveat"]``)."""
    return [table.attrs["caveat"]] if table.attrs.get("caveat") else []
