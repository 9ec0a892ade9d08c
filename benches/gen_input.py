#!/usr/bin/env python3
"""Writes N JSON instant lines, the input of the throughput benches.

    gen_input.py N OUTPUT [--seed S]

Each line is {"datetime":"2026-01-01T00:00:00.000000Z","value":<float>}: the
timestamps step by one second (so they increase and stay unique), the values
are positive floats with three decimals, like a sensor's readings. The output
is the same for the same N and seed, so runs can be compared.

Fast enough for 10M lines in well under a minute: the date part is formatted
once per day, not per line, and lines are written in large batches.
"""

import argparse
import datetime
import random

BATCH = 100_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, help="number of lines")
    ap.add_argument("output", help="file to write")
    ap.add_argument("--seed", type=int, default=1852)
    a = ap.parse_args()

    rnd = random.Random(a.seed).random
    day0 = datetime.date(2026, 1, 1)
    # The "HH:MM:SS" of every second of a day, formatted once.
    clock = [f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in range(86_400)]

    with open(a.output, "w", encoding="ascii", buffering=1 << 20) as out:
        i = 0
        while i < a.n:
            end = min(a.n, i + BATCH)
            lines = []
            day, prefix = None, ""
            for k in range(i, end):
                d, s = divmod(k, 86_400)
                if d != day:
                    day = d
                    prefix = (day0 + datetime.timedelta(days=d)).isoformat()
                # Values in (0.001, 100]: positive, so ln/log10 are defined too.
                v = 0.001 + rnd() * 99.999
                lines.append(
                    f'{{"datetime":"{prefix}T{clock[s]}.000000Z","value":{v:.3f}}}\n'
                )
            out.write("".join(lines))
            i = end


if __name__ == "__main__":
    main()
