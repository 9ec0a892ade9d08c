"""Windowed aggregation for the reference job: the semantics of mfstream's
`local` engine, written for reading rather than speed.

A Windower is built from the query spec (MFSTREAM_QUERY) and fed instants in
arrival order; `push` returns the events of the windows the instant closed,
`advance` those a watermark closed, `finish` the open windows at the end of
input, marked `"partial": true` (unless the query says `"emitPartial": false`).

- COUNT n: a result every n records.
- TUMBLING size unit: epoch-aligned windows [end - span, end), with
  end = t - t mod span + span. A record at or past the open window's end
  first closes it.
- HOPPING size unit hop hopUnit: results at epoch-aligned multiples b of the
  hop, each over the records in [b - span, b), emitted when a record at or
  past b arrives; windows without records are not emitted.
- Grace (the query's "grace", seconds, 0 when absent): event time is the
  latest record's datetime less the grace, so a record at t closes the
  windows ending at or before t - grace, and several TUMBLING windows may be
  open at once.
- Watermarks (time windows only; COUNT ignores them): a watermark W says no
  record earlier than W follows (the host has already subtracted the grace).
  It emits every window [start, end) with end <= W that holds records, as a
  record at W + grace would have, without adding one. A watermark not later
  than event time so far (from records or watermarks) changes nothing.
- Late records: a record every window of which ends at or before event time
  so far (its windows were emitted) is skipped and counted in the next
  event's "late".
- TUMBLING is HOPPING with the hop equal to the span.
- windowStart and windowEnd are the datetimes of the window's first and last
  record (in arrival order), verbatim.
"""

import math
import re

NANOS = {"SECONDS": 10**9, "MINUTES": 60 * 10**9, "HOURS": 3600 * 10**9}

ALLOWED = {
    "TReal": ("COUNT", "SUM", "AVG", "MIN", "MAX"),
    "TInteger": ("COUNT", "SUM", "AVG", "MIN", "MAX"),
    "TText": ("COUNT", "COUNT_DISTINCT"),
    "TBoolean": ("COUNT", "ANY", "ALL", "COUNT_TRUE", "COUNT_FALSE"),
}

# 2026-01-01T00:00:00Z, ...+00:00, ... +00, 2026-01-01 00:00:00.5+05:30, naive (UTC)
DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r" ?(Z|[+-]\d{2}(?::?\d{2})?)?"
)


def days_from_civil(y, m, d):
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_datetime(text):
    """Nanoseconds since the epoch, or None when `text` is not a datetime."""
    m = DATETIME.fullmatch(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    month_days = [31, 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28,
                  31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not (1 <= mo <= 12 and 1 <= d <= month_days[mo - 1] and h < 24 and mi < 60 and s < 60):
        return None
    frac = int((m.group(7) or "").ljust(9, "0") or 0)
    offset = 0
    zone = m.group(8)
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        oh, om = int(digits[:2]), int(digits[2:] or 0)
        if oh > 23 or om > 59:
            return None
        offset = (oh * 60 + om) * 60 * (1 if zone[0] == "+" else -1)
    seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset
    return seconds * 10**9 + frac


def aggregate(aggregation, values):
    if aggregation == "COUNT":
        return len(values)
    if aggregation == "SUM":
        return math.fsum(values)
    if aggregation == "AVG":
        try:
            return math.fsum(values) / len(values)
        except OverflowError:
            # The sum of values near the largest float overflows; their
            # average cannot: take it from the sum scaled by 2**-64 (exact).
            return math.fsum(v * 2.0**-64 for v in values) / len(values) * 2.0**64
    if aggregation == "MIN":
        return min(values)
    if aggregation == "MAX":
        return max(values)
    if aggregation == "COUNT_DISTINCT":
        return len(set(values))
    if aggregation == "ANY":
        return any(values)
    if aggregation == "ALL":
        return all(values)
    if aggregation == "COUNT_TRUE":
        return sum(1 for v in values if v)
    return sum(1 for v in values if not v)  # COUNT_FALSE


def positive(window, key):
    value = window.get(key)
    if type(value) is not int or value <= 0:
        raise ValueError(f"window.{key} must be a positive integer, got {value!r}")
    return value


def unit(window, key):
    value = window.get(key)
    if value not in NANOS:
        raise ValueError(f"window.{key} must be SECONDS, MINUTES or HOURS, got {value!r}")
    return NANOS[value]


class Windower:
    """The windows of one query."""

    def __init__(self, query, apply=None, v2=False):
        self.type = query.get("type", "TReal")
        self.aggregation = query.get("aggregation")
        self.apply = apply
        self.v2 = v2  # protocol 2: a window with no finite aggregate is an error line
        # A transform's outputs are numbers, whatever the property was.
        value_type = "TReal" if apply else self.type
        if value_type not in ALLOWED:
            raise ValueError(f"unknown property type {self.type!r}")
        if self.aggregation not in ALLOWED[value_type]:
            allowed = ", ".join(ALLOWED[value_type])
            raise ValueError(f"{value_type} allows {allowed}, not {self.aggregation!r}")
        window = query.get("window") or {}
        self.kind = window.get("type")
        self.size = positive(window, "size")
        if self.kind == "COUNT":
            self.span = None
        elif self.kind == "TUMBLING":
            self.span = self.size * unit(window, "unit")
            self.hop = self.span
        elif self.kind == "HOPPING":
            self.span = self.size * unit(window, "unit")
            self.hop = positive(window, "hop") * unit(window, "hopUnit")
            if self.hop > self.span:
                raise ValueError("window.hop must not be larger than window.size")
        else:
            raise ValueError(f"window.type must be COUNT, TUMBLING or HOPPING, got {self.kind!r}")
        self.emit_partial = query.get("emitPartial", True)
        grace = query.get("grace", 0)
        if type(grace) is not int or grace < 0:
            raise ValueError(f"grace must be a non-negative integer, got {grace!r}")
        self.grace = grace * 10**9
        self.records = []  # (nanos, datetime, value) in arrival order
        self.boundary = None  # the next boundary to emit
        self.watermark = None  # event time so far, less the grace
        self.late = 0

    def value_of(self, datetime, value):
        shown = f"record at {datetime} has value {value!r}"
        if self.apply:
            if type(value) not in (int, float):
                raise ValueError(f"{shown}, but the operation takes numbers")
            return self.apply(float(value), repr(float(value)))
        if self.type in ("TReal", "TInteger") and type(value) not in (int, float):
            raise ValueError(f"{shown}, but {self.type} values are numbers")
        if self.type == "TText" and type(value) is not str:
            raise ValueError(f"{shown}, but TText values are strings")
        if self.type == "TBoolean" and type(value) is not bool:
            raise ValueError(f"{shown}, but TBoolean values are booleans")
        return value

    def event(self, records, partial=False):
        start, end = records[0][1], records[-1][1]
        try:
            value = aggregate(self.aggregation, [r[2] for r in records])
        except OverflowError:  # math.fsum's way of saying "no finite sum"
            value = math.inf
        if isinstance(value, float) and not math.isfinite(value):
            message = f"the {self.aggregation} of the window from {start} to {end} overflows"
            if not self.v2:
                raise ValueError(message)
            return {"windowStart": start, "windowEnd": end, "count": len(records), "error": message}
        event = {
            "windowStart": start,
            "windowEnd": end,
            "value": value,
            "count": len(records),
        }
        if partial:
            event["partial"] = True
        if self.late:
            event["late"], self.late = self.late, 0
        return event

    def push(self, datetime, value):
        """Adds one instant; returns the events of the windows it closed."""
        value = self.value_of(datetime, value)
        if self.kind == "COUNT":
            self.records.append((None, datetime, value))
            if len(self.records) < self.size:
                return []
            records, self.records = self.records, []
            return [self.event(records)]
        t = parse_datetime(datetime)
        if t is None:
            raise ValueError(f"record at {datetime!r}: not a datetime")
        if self.watermark is not None and self.last_end(t) <= self.watermark:
            self.late += 1  # every window holding it has been emitted
            return []
        events = self.advance_to(t - self.grace)
        self.records.append((t, datetime, value))
        return events

    def last_end(self, t):
        """The end of the last window holding time t."""
        return (t + self.span) - (t + self.span) % self.hop

    def advance(self, datetime):
        """Takes a watermark: no record earlier than `datetime` follows.
        Returns the events of the windows ending at or before it, as a
        record at `datetime` plus the grace would have closed them (COUNT:
        none)."""
        w = parse_datetime(datetime)
        if w is None:
            raise ValueError(f"watermark {datetime!r}: not a datetime")
        if self.kind == "COUNT":
            return []
        return self.advance_to(w)

    def advance_to(self, w):
        """Moves event time to w, when later, emitting every window ending
        at or before it that holds records (empty ones are skipped)."""
        if self.watermark is not None and w <= self.watermark:
            return []
        self.watermark = w
        after = w - w % self.hop + self.hop  # the first boundary after w
        if self.boundary is None:
            self.boundary = after
        events = []
        while self.records:
            self.skip_empty()
            b = min(self.boundary, after)
            if b > w:
                self.boundary = b
                return events
            self.boundary = b
            events.extend(self.emit_boundary(partial=False))
        self.boundary = max(self.boundary, after)
        return events

    def skip_empty(self):
        """Moves the next boundary past those whose windows hold no record:
        to the first window of the oldest record."""
        oldest = min(r[0] for r in self.records)
        self.boundary = max(self.boundary, oldest - oldest % self.hop + self.hop)

    def emit_boundary(self, partial):
        """The event of the window ending at the next boundary, if it holds
        records; moves to the following boundary and evicts what it no
        longer needs."""
        b = self.boundary
        inside = [r for r in self.records if b - self.span <= r[0] < b]
        self.boundary += self.hop
        self.records = [r for r in self.records if r[0] >= self.boundary - self.span]
        return [self.event(inside, partial)] if inside else []

    def finish(self):
        """The open windows at the end of input, as partial results."""
        events = []
        if self.kind != "COUNT":
            while self.records:
                self.skip_empty()
                events.extend(self.emit_boundary(partial=True))
        elif self.records:
            events.append(self.event(self.records, partial=True))
        self.records = []
        return events if self.emit_partial else []
