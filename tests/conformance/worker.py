"""A conformance worker: run.py starts a few of these and feeds each one pair
at a time, so that a pair that crashes the process (or hangs) costs only
itself.  Reads "<op full_name> <dtype>" lines on stdin; for each, writes one
JSON Verdict line on its protocol pipe (the original stdout).  Whatever the
ops or the device print goes to stderr, so it cannot corrupt the protocol."""
import argparse
import dataclasses
import json
import os
import sys
import traceback


def _protocol_pipe():
    """The original stdout as the protocol pipe, and fd 1 pointed at stderr."""
    pipe = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return pipe


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--max-samples", type=int, default=None)
    args = parser.parse_args()
    pipe = _protocol_pipe()

    import torch
    from conformance import catalog, harness
    torch.set_num_threads(1)  # run.py runs one worker per core
    catalog.op_db()
    pipe.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        name, dtype = line.split()
        try:
            verdict = harness.check(name, catalog.DTYPE_BY_NAME[dtype], args.device,
                                    args.mode, args.max_samples)
        except Exception as error:  # noqa: BLE001 -- a harness bug is one pair's verdict
            traceback.print_exc()
            verdict = harness.Verdict(name, dtype, harness.FAILS,
                                      f"harness error: {type(error).__name__}: {error}"[:240])
        pipe.write(json.dumps(dataclasses.asdict(verdict)) + "\n")


if __name__ == "__main__":
    main()
