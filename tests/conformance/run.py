#!/usr/bin/env python3
"""Holds a device against PyTorch's OpInfo database (`make conformance`).

    tests/conformance/run.py                      # every op, every dtype, on neuron
    tests/conformance/run.py --ops add mm --dtypes float32,bfloat16 --mode native
    tests/conformance/run.py --write-docs         # and regenerate docs/ops.md
    tests/conformance/run.py --from-results build/conformance/results.json --write-docs

Each (OpInfo, dtype) pair runs in one of --jobs worker processes, one pair at
a time, so an exception is one pair's verdict and a crash or a hang (past
--timeout) costs only the pair that caused it ("fails: crashed ...").  The
verdicts go to --out as JSON.  In modes fallback and both, the run fails (exit
status 1) when its failures differ from tests/conformance/expected_failures.txt:
a failure not listed, or a listed pair that passes.
"""
import argparse
import collections
import dataclasses
import json
import os
import pathlib
import selectors
import signal
import subprocess
import sys
import time

TESTS_DIR = pathlib.Path(__file__).resolve().parent.parent
REPO_DIR = TESTS_DIR.parent
sys.path.insert(0, str(TESTS_DIR))

from conformance import catalog, expected, harness, report  # noqa: E402


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="+", metavar="NAME",
                        help="OpInfo full names (default: all of op_db); 'slice' "
                             "means the representative slice make test runs")
    parser.add_argument("--dtypes", default=",".join(catalog.DTYPE_BY_NAME),
                        help="comma-separated dtypes (default: %(default)s)")
    parser.add_argument("--mode", choices=harness.MODES, default="both",
                        help="native: fallback as error; fallback: fallback on; "
                             "both: native, then fallback where that fails")
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--out", default=str(REPO_DIR / "build/conformance/results.json"))
    parser.add_argument("--write-docs", nargs="?", const=str(REPO_DIR / "docs/ops.md"),
                        metavar="PATH",
                        help="write the table (default path: %(const)s)")
    parser.add_argument("--from-results", metavar="JSON",
                        help="run nothing: report on an earlier --out file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes; 0 runs in this process, unprotected")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one pair may take before it counts as hung")
    parser.add_argument("--max-samples", type=int, default=None)
    parser.add_argument("--expected", default=None,
                        help="expected-failures file, or 'none' (default: "
                             "tests/conformance/expected_failures.txt for neuron)")
    parser.add_argument("--update-expected", action="store_true",
                        help="rewrite the expected-failures file from this run")
    args = parser.parse_args(argv)
    args.dtype_names = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in args.dtype_names if d not in catalog.DTYPE_BY_NAME]
    if unknown:
        parser.error(f"unknown dtypes {unknown}; choose from {list(catalog.DTYPE_BY_NAME)}")
    if args.ops == ["slice"]:
        args.ops = list(catalog.SLICE)
    if args.expected is None and args.device.split(":")[0] == "neuron":
        args.expected = str(expected.DEFAULT_PATH)
    if args.expected == "none":
        args.expected = None
    return args


class _Worker:
    """One worker process, fed one pair at a time; its output is read with a
    buffer so that a partial line never blocks the scheduler."""

    def __init__(self, argv, env, log):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, env=env, cwd=REPO_DIR,
                                     start_new_session=True)
        self.buffer = b""
        self.ready = False
        self.pair = None
        self.since = time.monotonic()

    def send(self, pair):
        self.pair, self.since = pair, time.monotonic()
        self.proc.stdin.write(f"{pair[0]} {catalog.DTYPE_NAMES[pair[1]]}\n".encode())
        self.proc.stdin.flush()

    def read_lines(self):
        """The complete lines now available, or None once the worker is gone."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def stop(self, grace=5.0):
        """Ends the worker -- closing its stdin asks it to exit; after `grace`
        seconds it is killed -- and says how it ended."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass  # it is gone already
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc.stdout.close()
        code = self.proc.returncode
        if code < 0:
            return f"crashed: {signal.Signals(-code).name}"
        return f"crashed: worker exited with status {code}"


def _fail(pair, reason):
    return harness.Verdict(pair[0], catalog.DTYPE_NAMES[pair[1]], harness.FAILS, reason)


class _Scheduler:
    """Feeds the pairs to the workers and collects one verdict per pair."""

    _STARTUP_SECONDS = 600

    def __init__(self, args, log_dir):
        self.args = args
        self.argv = [sys.executable, "-m", "conformance.worker", "--device", args.device,
                     "--mode", args.mode]
        if args.max_samples is not None:
            self.argv += ["--max-samples", str(args.max_samples)]
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")])))
        # One worker per core: the device's own compute pool gets one thread.
        self.env.setdefault("TORCHNEURON_NUM_THREADS", "1")
        self.log_dir = log_dir
        self.selector = selectors.DefaultSelector()
        self.started = 0

    def _start(self):
        log = open(self.log_dir / f"worker-{self.started}.log", "wb")
        self.started += 1
        worker = _Worker(self.argv, self.env, log)
        log.close()
        self.selector.register(worker.proc.stdout, selectors.EVENT_READ, worker)
        return worker

    def _retire(self, worker, grace=5.0):
        self.selector.unregister(worker.proc.stdout)
        return worker.stop(grace)

    def run(self, pairs, on_verdict):
        pending = collections.deque(pairs)
        workers = [self._start() for _ in range(min(self.args.jobs, len(pairs)))]
        while workers:
            for worker in workers:
                if worker.ready and worker.pair is None and pending:
                    worker.send(pending.popleft())
            for key, _ in self.selector.select(timeout=1.0):
                worker = key.data
                lines = worker.read_lines()
                if lines is None:
                    reason = self._retire(worker)
                    if not worker.ready:
                        raise RuntimeError(f"a worker died while starting ({reason}); see "
                                           f"{self.log_dir}/worker-*.log")
                    if worker.pair is not None:
                        on_verdict(_fail(worker.pair, reason))
                    workers.remove(worker)
                    if pending:
                        workers.append(self._start())
                    continue
                for message in lines:
                    if message.get("ready"):
                        worker.ready = True
                    else:
                        on_verdict(harness.Verdict(**message))
                        worker.pair = None
            now = time.monotonic()
            for worker in list(workers):
                limit = self.args.timeout if worker.ready else self._STARTUP_SECONDS
                busy = worker.pair is not None or not worker.ready
                if busy and now - worker.since > limit:
                    self._retire(worker, grace=0.0)
                    workers.remove(worker)
                    if worker.pair is not None:
                        on_verdict(_fail(worker.pair, f"timeout: over {limit:.0f} s"))
                    if pending:
                        workers.append(self._start())
            if not pending:
                for worker in list(workers):
                    if worker.ready and worker.pair is None:
                        self._retire(worker)
                        workers.remove(worker)


class _Progress:
    def __init__(self, total):
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.counts = collections.Counter()

    def __call__(self, verdict):
        self.done += 1
        self.counts[verdict.status] += 1
        if self.done % 100 == 0 or self.done == self.total:
            elapsed = time.monotonic() - self.start
            print(f"[{self.done}/{self.total} {elapsed:.0f}s] " +
                  " ".join(f"{s}={n}" for s, n in sorted(self.counts.items())),
                  file=sys.stderr, flush=True)


def _run(args):
    names = args.ops
    dtypes = [catalog.DTYPE_BY_NAME[d] for d in args.dtype_names]
    pairs = catalog.all_pairs(names, dtypes)
    progress = _Progress(len(pairs))
    verdicts = {}

    def record(verdict):
        verdicts[(verdict.op, verdict.dtype)] = verdict
        progress(verdict)

    start = time.monotonic()
    if args.jobs == 0:
        for name, dtype in pairs:
            record(harness.check(name, dtype, args.device, args.mode, args.max_samples))
    else:
        log_dir = pathlib.Path(args.out).parent / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        _Scheduler(args, log_dir).run(pairs, record)
    ordered = [verdicts[(name, catalog.DTYPE_NAMES[dtype])] for name, dtype in pairs]
    import torch
    meta = {"device": args.device, "mode": args.mode, "torch": torch.__version__,
            "ops": names, "dtypes": args.dtype_names, "pairs": len(pairs),
            "jobs": args.jobs, "seconds": round(time.monotonic() - start, 1),
            "max_samples": args.max_samples}
    return ordered, meta


def _load(path):
    data = json.loads(pathlib.Path(path).read_text())
    return [harness.Verdict(**v) for v in data["verdicts"]], data["meta"]


def _check_expected(args, verdicts):
    listed = expected.load(args.expected)
    if args.update_expected:
        expected.write(args.expected, verdicts, listed)
        print(f"wrote {args.expected}")
        return True
    failures, passes, stale = expected.discrepancies(verdicts, listed)
    for (op, dtype), reason in failures:
        print(f"UNEXPECTED FAILURE {op} {dtype}: {reason}")
    for op, dtype in passes:
        print(f"UNEXPECTED PASS {op} {dtype} (listed as: {listed[(op, dtype)]})")
    for op, dtype in stale:
        print(f"STALE ENTRY {op} {dtype}: op_db has no such pair")
    return not (failures or passes or stale)


def main(argv=None):
    args = _parse_args(argv)
    if args.from_results:
        verdicts, meta = _load(args.from_results)
    else:
        verdicts, meta = _run(args)
        out = pathlib.Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"meta": meta, "verdicts": [
            dataclasses.asdict(v) for v in verdicts]}, indent=1) + "\n")
        print(f"wrote {out}")
    if args.write_docs:
        pathlib.Path(args.write_docs).write_text(report.render(verdicts, meta))
        print(f"wrote {args.write_docs}")
    print("\n".join(report.totals(verdicts)))
    if args.expected and meta["mode"] != "native":
        return 0 if _check_expected(args, verdicts) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
