#!/usr/bin/env python3
"""The mfstream bridge job protocol, as a reference job (Python 3, stdlib only).

Usage::

    MFSTREAM_FRAMING=value|json  mfstream_job.py OP [ARG]      e.g.  mfstream_job.py mul 1.852
    MFSTREAM_FRAMING=json MFSTREAM_QUERY='{...}'  mfstream_job.py aggregate AGG
    MFSTREAM_FRAMING=json MFSTREAM_QUERY='{...}'  mfstream_job.py STEP     (positions)

The protocol in brief (jobs/README.md has it in full):

- Arguments: the operation (UNARY and BINARY below, generated from the
  catalogue) and, for the BINARY ones only, its scalar argument.
- Environment: MFSTREAM_FRAMING is "value" (the default when unset) or "json";
  MFSTREAM_QUERY holds the query spec as JSON. A transform needs nothing more
  than its arguments; a windowed aggregate (arguments `aggregate AGG`, json
  framing only) reads its window, and any transform composed before it,
  from MFSTREAM_QUERY. See windows.py for the window semantics.
- value framing: one number per line in, its result per line out.
- json framing: one instant per line in, {"datetime":"...","value":1.5}, any
  key order; one event per line out, {"datetime":<the same>,"value":<result>}.
  A windowed aggregate answers with a line per window when it closes, and
  also takes watermark lines, {"watermark":"..."}: no record earlier than it
  follows, so every window ending at or before it is emitted at once. With
  "grace" (seconds) in MFSTREAM_QUERY, a record at t closes only the windows
  ending at or before t - grace (watermark lines come with it subtracted).
- Positions (json framing; STEP is speed, azimuth, cumulativeLength,
  distance, position or geofence, the rest in MFSTREAM_QUERY: see
  positions.py): instants {"datetime":"...","coordinates":[x,y]}; each
  record's answers end with one line: {"datetime","value"},
  {"datetime","coordinates"} or {"datetime"} alone, after a geofence's
  {"datetime","coordinates","detect"} lines. A position that cannot be
  measured (out of range, not after the previous one) is an error line.
  Geodetic queries need the geographiclib package (PyPI).
- Exactly one output per input, in order. Results are finite numbers in their
  shortest round-trip form (repr of a float).
- Protocol 2 (MFSTREAM_PROTOCOL=2 or more, which the host sets): a value with
  no result (ln of 0, an overflow) is answered with an error line in the
  answer's place and the job goes on: value framing "!" and the message,
  json framing {"datetime":"...","error":"..."}; a windowed aggregate leaves
  the record out of its windows, and answers a window whose aggregate is not
  finite with {"windowStart":"...","windowEnd":"...","error":"..."}. The
  host applies the query's onError (skip or fail).
- Errors go to stderr and end the job with status 2: bad usage (before
  anything is read), a line that does not parse, and with protocol 1 a value
  outside the operation's domain (ln of 0, an overflow: anything with no
  finite result). Each names the line number and the text or value. Answers
  to earlier lines are still delivered.
- At end of input: flush, exit 0. If the host closes our stdout, exit 0 quietly.
- Flushing: stdout is flushed before every read of stdin, which is exactly
  when a read might block; never once per record unless records arrive one
  by one.

On flushing and speed: stdin is read with os.read, which returns whatever the
pipe holds (up to 64 KiB) without waiting for more, and no input is buffered
where we cannot see it. So "flush before each read" is exact: a live reader
gets each answer as soon as its line has arrived, and bulk input costs one
flush per chunk. Correctness comes first here; the job is still only as fast
as Python (see mfstream-fastjob for a fast one).
"""

import json
import math
import operator
import os
import sys

import positions
import windows

CHUNK = 64 * 1024
MAX_LINE = 1024 * 1024  # every buffer is bounded, input lines too

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
CATALOGUE = ", ".join(list(UNARY) + [op + " <x>" for op in BINARY])
USAGE = (
    "usage: mfstream_job.py OP [ARG]   (MFSTREAM_FRAMING=value|json)\n"
    "       mfstream_job.py aggregate AGG   (MFSTREAM_FRAMING=json, the query in MFSTREAM_QUERY)\n"
    "       mfstream_job.py STEP   (MFSTREAM_FRAMING=json, a position query in MFSTREAM_QUERY; "
    f"STEP is one of {', '.join(positions.STEPS)})"
)


class JobError(Exception):
    """Ends the job with status 2, its message on stderr."""


class UsageError(JobError):
    """A JobError in the command line or environment: the usage line follows."""


class NoResult(JobError):
    """A value with no result for the operation: with protocol 2 an error line
    answers it, with protocol 1 it ends the job as any JobError."""


def protocol():
    """The protocol version the host speaks (MFSTREAM_PROTOCOL), 1 when unset
    or unreadable."""
    try:
        return int(os.environ.get("MFSTREAM_PROTOCOL", "1"))
    except ValueError:
        return 1


V2 = protocol() >= 2


def transform(args):
    """Validates OP [ARG] and returns apply(x, shown) -> result."""
    if len(args) not in (1, 2):
        raise UsageError(f"expected an operation and at most one argument, got {args!r}")
    op, arg = args[0], args[1] if len(args) == 2 else None
    if op not in UNARY and op not in BINARY:
        raise UsageError(f"unknown operation {op!r}: supported operations are {CATALOGUE}")
    if op in UNARY:
        if arg is not None:
            raise UsageError(f"operation {op} takes no argument")
        fn = UNARY[op]
    else:
        if arg is None:
            raise UsageError(f"operation {op} needs a scalar argument: {op} <x>")
        a = parse_number(arg)
        if a is None or not math.isfinite(a):
            raise UsageError(f"operation {op} needs a finite number, got {arg!r}")
        if op in NONZERO_ARG and a == 0:
            raise UsageError(f"operation {op} by zero is undefined")
        binary = BINARY[op]

        def fn(x):
            return binary(x, a)

    def apply(x, shown):
        if op in POSITIVE_ONLY and x <= 0:
            raise NoResult(f"{op} is defined for positive values only, got {shown}")
        try:
            y = float(fn(x))
        except (ValueError, OverflowError):  # math's way of saying "no result"
            y = math.nan
        if not math.isfinite(y):
            raise NoResult(f"{op} has no finite result, got {shown}")
        return y

    return apply


def parse_number(text):
    """A float as Python reads one, minus the digit separators ("1_0") it
    alone accepts; None if it does not parse."""
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def quote(line, shown=200):
    """A line for a message, cut short: the host keeps the tail of stderr, and
    the line number must not scroll out of it behind a megabyte of garbage."""
    more = "…" if len(line) > shown else ""
    return repr(line[:shown].decode("utf-8", "replace")) + more


def answer_value(apply, line):
    text = line.strip().decode("utf-8", "replace")
    x = parse_number(text)
    if x is None:
        raise JobError(f"not a number: {quote(line)}")
    try:
        return repr(apply(x, text)) + "\n"
    except NoResult as e:
        if not V2:
            raise
        return f"!{e}\n"


def not_json(constant):
    raise ValueError(f"{constant} is not JSON")


def unique_keys(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("a key is repeated")
    return obj


# Repeated keys, NaN and Infinity are errors, not quietly accepted. The coders
# are made once: building one per line would double the job's cost.
STRICT = json.JSONDecoder(object_pairs_hook=unique_keys, parse_constant=not_json)
COMPACT = json.JSONEncoder(separators=(",", ":"))


def answer_json(apply, line):
    shape = '{"datetime":"...","value":<number>}'
    try:
        obj = json.loads(line, object_pairs_hook=unique_keys, parse_constant=not_json)
        if type(obj) is not dict or sorted(obj) != ["datetime", "value"]:
            raise ValueError
        datetime, value = obj["datetime"], obj["value"]
        if not isinstance(datetime, str) or type(value) not in (int, float):
            raise ValueError
        x = float(value)
    except (ValueError, TypeError, OverflowError):
        raise JobError(f"not a JSON instant {shape}: {quote(line)}") from None
    try:
        event = {"datetime": datetime, "value": apply(x, repr(x))}
    except NoResult as e:
        if not V2:
            raise
        event = {"datetime": datetime, "error": str(e)}
    return COMPACT.encode(event) + "\n"


def lines(out):
    """Yields (number, line) for stdin's lines, newline removed; flushes `out`
    before every read, since any read may block."""
    number, pending = 0, b""
    while True:
        out.flush()
        chunk = os.read(0, CHUNK)
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        for line in complete:
            number += 1
            yield number, line
        if len(pending) >= MAX_LINE:
            raise JobError(f"line {number + 1}: no end of line within {MAX_LINE} bytes")
    if pending:
        yield number + 1, pending


def aggregate(args, framing):
    """Validates `aggregate AGG` and MFSTREAM_QUERY; returns a windows.Windower."""
    if framing != "json":
        raise UsageError("windowed aggregates need MFSTREAM_FRAMING=json")
    try:
        query = json.loads(os.environ.get("MFSTREAM_QUERY", ""))
        if type(query) is not dict:
            raise ValueError("not an object")
    except ValueError as e:
        raise UsageError(f"MFSTREAM_QUERY is not a JSON query ({e})") from None
    if len(args) != 2 or args[1] != query.get("aggregation"):
        raise UsageError(
            f"expected `aggregate {query.get('aggregation')}` as MFSTREAM_QUERY says, got {args!r}"
        )
    apply = None
    if "operation" in query:
        op_args = [query["operation"]] + ([repr(float(query["arg"]))] if "arg" in query else [])
        apply = transform(op_args)
    try:
        return windows.Windower(query, apply, v2=V2)
    except ValueError as e:
        raise UsageError(f"MFSTREAM_QUERY: {e}") from None


def position_step(args, framing):
    """Validates STEP and MFSTREAM_QUERY; returns a positions.Step."""
    if framing != "json":
        raise UsageError("position queries need MFSTREAM_FRAMING=json")
    if len(args) != 1:
        raise UsageError(f"expected one position step, got {args!r}")
    try:
        query = json.loads(os.environ.get("MFSTREAM_QUERY", ""))
        if type(query) is not dict:
            raise ValueError("not an object")
    except ValueError as e:
        raise UsageError(f"MFSTREAM_QUERY is not a JSON query ({e})") from None
    try:
        return positions.Step(args[0], query)
    except ImportError as e:
        raise JobError(str(e)) from None
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise UsageError(f"MFSTREAM_QUERY: not a {args[0]} query ({e!r})") from None


def answer_position(step, line):
    """A position instant to its answer lines, the last ending it."""
    shape = '{"datetime":"...","coordinates":[x, y]}'
    try:
        obj = STRICT.decode(line.decode("utf-8"))
        if type(obj) is not dict or sorted(obj) != ["coordinates", "datetime"]:
            raise ValueError
        if not isinstance(obj["datetime"], str):
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        raise JobError(f"not a JSON position {shape}: {quote(line)}") from None
    try:
        answers = step.push(obj["datetime"], obj["coordinates"])
    except positions.NoPosition as e:
        # Error lines are part of the position protocol, whatever
        # MFSTREAM_PROTOCOL says (jobs/README.md, "Positions").
        answers = [{"datetime": obj["datetime"], "error": str(e)}]
    return "".join(COMPACT.encode(a) + "\n" for a in answers)


def answer_window(windower, line):
    """An instant, or a watermark ({"watermark":"..."}: no record earlier
    than it follows), to the lines of the windows it closed."""
    shape = '{"datetime":"...","value":<number, string or boolean>} or {"watermark":"..."}'
    try:
        obj = STRICT.decode(line.decode("utf-8"))
        if type(obj) is not dict:
            raise ValueError
        keys = sorted(obj)
        if keys == ["watermark"] and isinstance(obj["watermark"], str):
            pass
        elif keys != ["datetime", "value"] or not isinstance(obj["datetime"], str):
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        raise JobError(f"not a JSON instant or watermark {shape}: {quote(line)}") from None
    try:
        if "watermark" in obj:
            events = windower.advance(obj["watermark"])
        else:
            events = windower.push(obj["datetime"], obj["value"])
    except NoResult as e:
        if not V2:
            raise
        # Left out of its windows; the host counts it (or fails).
        events = [{"datetime": obj["datetime"], "error": str(e)}]
    except ValueError as e:
        raise JobError(str(e)) from None
    return "".join(COMPACT.encode(event) + "\n" for event in events)


def main(args):
    out = sys.stdout.buffer
    try:
        try:
            framing = os.environ.get("MFSTREAM_FRAMING", "value")
            if framing not in ("value", "json"):
                raise UsageError(f'MFSTREAM_FRAMING must be "value" or "json", got {framing!r}')
            if args[:1] == ["aggregate"]:
                windower = aggregate(args, framing)
                answer = answer_window
                state = windower
            elif args[:1] and args[0] in positions.STEPS:
                state = position_step(args, framing)
                answer = answer_position
            else:
                state = transform(args)
                answer = answer_value if framing == "value" else answer_json
            for number, line in lines(out):
                try:
                    out.write(answer(state, line).encode())
                except JobError as e:
                    raise JobError(f"line {number}: {e}") from None
            if answer is answer_window:
                for event in windower.finish():
                    out.write((COMPACT.encode(event) + "\n").encode())
            return 0
        except JobError as e:
            usage = f"\n{USAGE}" if isinstance(e, UsageError) else ""
            print(f"mfstream_job.py: {e}{usage}", file=sys.stderr)
            return 2
        finally:
            out.flush()  # the answers to every line before a bad one, too
    except BrokenPipeError:
        # The host stopped reading: it no longer wants answers. Point stdout
        # at /dev/null so that the interpreter's own last flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
