#!/usr/bin/env python3
"""mfstream bridge job on Apache Beam (Python SDK), in the FnApiRunner.

    beam_job.py OP [ARG]        MFSTREAM_FRAMING=value (default) or json

The pipeline: Create([stdin]) -> ParDo(read stdin's lines) -> ParDo(the lifted
operation) -> ParDo(write stdout). The runner fuses the three steps into one
stage and runs stdin as one bundle, element by element: each answer leaves as
soon as its line has arrived (stdout is flushed before every read of stdin),
but the pipeline is a bounded one that ends at EOF; see README.md.

Protocol (jobs/README.md): one answer per line, in order; exit 0 at EOF;
exit 2 with a message naming the line for bad usage or a line that does not
parse; results only on stdout. A value with no result (a domain error: ln of
0, an overflow) is answered with an error line under protocol 2
(MFSTREAM_PROTOCOL=2, which the host sets: "!" and the message in value
framing, {"datetime":...,"error":...} in json framing) and the job goes on;
under protocol 1 it ends the job with status 2, naming the line.
"""

import json
import logging
import math
import operator
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mfstream_stdio as stdio  # noqa: E402

# The operations, from the catalogue (crates/ops/src/catalogue.rs). Do not
# edit by hand: MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated
# BEGIN GENERATED: operations
UNARY = {
    "ln": math.log,
    "exp": math.exp,
    "log10": math.log10,
    "ceil": math.ceil,
    "floor": math.floor,
    "abs": abs,
    "degrees": math.degrees,
    "radians": math.radians,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
}
POSITIVE_ONLY = {"ln", "log10"}
NONZERO_ARG = {"div"}
# END GENERATED: operations
USAGE = "usage: beam_job.py OP [ARG]   (MFSTREAM_FRAMING=value|json)"


def protocol():
    """The bridge protocol version the host speaks; 1 when unset or unreadable."""
    try:
        return int(os.environ.get("MFSTREAM_PROTOCOL", "1"))
    except ValueError:
        return 1


def usage_error(message):
    stdio.fail(2, f"{message}\n{USAGE}")


def parse_number(text):
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def check_args(args):
    """Validates OP [ARG] before anything is read: (op, arg)."""
    if len(args) not in (1, 2):
        usage_error(f"expected an operation and at most one argument, got {args!r}")
    op, arg = args[0], args[1] if len(args) == 2 else None
    if op == "aggregate":
        usage_error("windowed aggregates are not computed by this job (aggregates = false)")
    if op not in UNARY and op not in BINARY:
        usage_error(f"unknown operation {op!r}")
    if op in UNARY:
        if arg is not None:
            usage_error(f"operation {op} takes no argument")
        return op, None
    if arg is None:
        usage_error(f"operation {op} needs a scalar argument: {op} <x>")
    a = parse_number(arg)
    if a is None or not math.isfinite(a):
        usage_error(f"operation {op} needs a finite number, got {arg!r}")
    if op in NONZERO_ARG and a == 0:
        usage_error(f"operation {op} by zero is undefined")
    return op, a


def run(op, arg, framing):
    # Imported here: apache_beam takes most of the start-up time, and bad
    # usage should not wait for it.
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    fn = UNARY.get(op) or (lambda x: BINARY[op](x, arg))
    v2 = protocol() >= 2

    class ReadStdin(beam.DoFn):
        def process(self, _):
            yield from stdio.lines()

    class Parse(beam.DoFn):
        """(number, line) -> (number, datetime or None, x)."""

        def process(self, element):
            number, line = element
            if framing == "value":
                x = parse_number(line.strip().decode("utf-8", "replace"))
                if x is None:
                    stdio.fail(2, f"line {number}: not a number: {line[:200]!r}")
                yield number, None, x
                return
            try:
                obj = json.loads(line)
                if type(obj) is not dict or sorted(obj) != ["datetime", "value"]:
                    raise ValueError
                if not isinstance(obj["datetime"], str) or type(obj["value"]) not in (int, float):
                    raise ValueError
            except ValueError:
                stdio.fail(2, f'line {number}: not a JSON instant {{"datetime":"...","value":<number>}}: {line[:200]!r}')
            yield number, obj["datetime"], float(obj["value"])

    class Apply(beam.DoFn):
        """(number, datetime, x) -> (datetime, result, None), or with no
        result (protocol 2) (datetime, None, why)."""

        def process(self, element):
            number, datetime, x = element
            if op in POSITIVE_ONLY and x <= 0:
                why = f"{op} is defined for positive values only, got {x!r}"
            else:
                try:
                    y = float(fn(x))
                except (ValueError, OverflowError):
                    y = math.nan
                if math.isfinite(y):
                    yield datetime, y, None
                    return
                why = f"{op} has no finite result, got {x!r}"
            if not v2:
                stdio.fail(2, f"line {number}: {why}")
            yield datetime, None, why

    class WriteStdout(beam.DoFn):
        def process(self, element):
            datetime, y, why = element
            if datetime is None:
                stdio.write(repr(y) + "\n" if why is None else f"!{why}\n")
            else:
                answer = {"datetime": datetime, "value": y} if why is None else {"datetime": datetime, "error": why}
                stdio.write(json.dumps(answer, separators=(",", ":")) + "\n")

    options = PipelineOptions(["--direct_num_workers=1"])
    with beam.Pipeline(runner=FnApiRunner(), options=options) as p:
        (
            p
            | "stdin" >> beam.Create([None])
            | "lines" >> beam.ParDo(ReadStdin())
            | "parse" >> beam.ParDo(Parse())
            | op >> beam.ParDo(Apply())
            | "stdout" >> beam.ParDo(WriteStdout())
        )
    stdio.flush()


def main(args):
    stdio.claim_stdout()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    framing = os.environ.get("MFSTREAM_FRAMING", "value")
    if framing not in ("value", "json"):
        usage_error(f'MFSTREAM_FRAMING must be "value" or "json", got {framing!r}')
    op, arg = check_args(args)
    stdio.private_tmp()
    run(op, arg, framing)
    stdio.exit_now(0)


if __name__ == "__main__":
    main(sys.argv[1:])
