"""``python -m torch_neuronx.profiler report TRACE.json -o report.html``."""
from __future__ import annotations

import argparse
import sys

from torch_neuronx.profiler._report import report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.profiler")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("report", help="write a self-contained HTML report of a chrome trace")
    r.add_argument("trace", help="trace JSON written by torch.profiler (export_chrome_trace, "
                   "tensorboard_trace_handler; .json or .json.gz)")
    r.add_argument("-o", "--output", default=None,
                   help="HTML file to write (default: the trace's name with .html)")
    r.add_argument("--title", default=None, help="title shown in the report")
    args = parser.parse_args(argv)
    out = report(args.trace, args.output, title=args.title)
    s = out["summary"]
    print(f"wrote {out['path']}: {s['events']} events in {s['lanes']} lanes "
          f"({s['device_lanes']} device streams), {s['fallbacks']} fallback ranges, "
          f"{s['memory_points']} memory samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
