"""The committed list of (OpInfo, dtype) pairs the device gets wrong even with
the CPU fallback, each with its reason.  A run fails on a failure that is not
listed and on a listed pair that now passes, so the list stays true.

File format: one pair a line, "<op full_name> <dtype> <reason...>"; blank
lines and lines starting with '#' are ignored."""
import pathlib

from . import catalog

DEFAULT_PATH = pathlib.Path(__file__).with_name("expected_failures.txt")

_HEADER = """\
# (OpInfo, dtype) pairs the neuron device gets wrong even with the CPU
# fallback: "<op full_name> <dtype> <reason>".  tests/conformance/run.py and
# tests/test_conformance_slice.py fail on a failure missing here and on a
# listed pair that passes.  Regenerate: tests/conformance/run.py --update-expected
"""


def load(path=DEFAULT_PATH):
    """{(op, dtype name): reason}; raises ValueError on a malformed line."""
    entries = {}
    path = pathlib.Path(path)
    if not path.exists():
        return entries
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(maxsplit=2)
        if len(fields) < 2 or fields[1] not in catalog.DTYPE_BY_NAME:
            raise ValueError(f"{path}:{number}: expected '<op> <dtype> <reason>': {line!r}")
        entries[(fields[0], fields[1])] = fields[2] if len(fields) > 2 else ""
    return entries


def discrepancies(verdicts, expected):
    """(unexpected failures, unexpected passes, stale entries) among the pairs
    that ran; stale entries name an op or dtype op_db no longer has."""
    failed = {(v.op, v.dtype): v.reason for v in verdicts if v.status == "fails"}
    ran = {(v.op, v.dtype) for v in verdicts}
    unexpected_failures = sorted((pair, reason) for pair, reason in failed.items()
                                 if pair not in expected)
    unexpected_passes = sorted(pair for pair in expected
                               if pair in ran and pair not in failed)
    existing = {(name, catalog.DTYPE_NAMES[dtype]) for name, dtype in catalog.all_pairs()}
    stale = sorted(pair for pair in expected if pair not in existing)
    return unexpected_failures, unexpected_passes, stale


def write(path, verdicts, expected):
    """Rewrites the file: the pairs that ran now say what this run found; the
    entries for pairs that did not run are kept."""
    ran = {(v.op, v.dtype) for v in verdicts}
    entries = {pair: reason for pair, reason in expected.items() if pair not in ran}
    entries.update({(v.op, v.dtype): v.reason for v in verdicts if v.status == "fails"})
    order = {name: index for index, name in enumerate(catalog.op_db())}
    dtype_order = {name: index for index, name in enumerate(catalog.DTYPE_BY_NAME)}
    rows = sorted(entries.items(), key=lambda item: (order.get(item[0][0], len(order)),
                                                     item[0][0], dtype_order[item[0][1]]))
    lines = [f"{op} {dtype} {' '.join(reason.split()) or '(no reason)'}"
             for (op, dtype), reason in rows]
    pathlib.Path(path).write_text(_HEADER + "".join(line + "\n" for line in lines))
