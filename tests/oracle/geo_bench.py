#!/usr/bin/env python3
"""pymeos and shapely on the positions benches/geo.rs times, for a side-by-side figure.

Input (stdin): NDJSON `{"datetime", "coordinates"}`, one trajectory in time order.
Options: --fence GEOJSON (a Polygon/MultiPolygon; the text, or @FILE).
Prints one JSON line: positions, and positions/s for
- speed: `TGeogPointSeq("[…]").speed()`, pymeos's fastest path: the whole
  trajectory parsed and computed in C (the parse included);
- geofence: shapely 2 vectorised, the least a Python geofence needs:
  `contains_xy` per instant (inside/outside) and `intersects` of each segment
  with the fence's boundary (a crossing to interpolate).
Input parsing is not timed.
"""

import argparse
import json
import sys
import time

import numpy as np
import shapely
from pymeos import TGeogPointSeq, pymeos_initialize

sys.path.insert(0, __import__("os").path.dirname(__file__))
from geo_oracle import geojson_arg, meos_time, micros  # noqa: E402


def best_of(n, f):
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fence", required=True)
    args = ap.parse_args()
    pymeos_initialize("UTC")
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    ts = [micros(r["datetime"]) for r in rows]
    xy = np.array([r["coordinates"][:2] for r in rows], dtype=float)
    # Plain floats: numpy 2 would write np.float64(…) into the WKT.
    texts = [f"POINT({float(x)!r} {float(y)!r})@{meos_time(t)}" for (x, y), t in zip(xy, ts)]
    n = len(rows)

    body = "[" + ", ".join(texts) + "]"

    def speed():
        return TGeogPointSeq(body).speed()

    fence = geojson_arg(args.fence)
    shapely.prepare(fence)
    boundary = fence.boundary
    shapely.prepare(boundary)

    def geofence():
        inside = shapely.contains_xy(fence, xy[:, 0], xy[:, 1])
        segments = shapely.linestrings(np.stack([xy[:-1], xy[1:]], axis=1))
        crossing = shapely.intersects(boundary, segments)
        return inside, crossing

    print(json.dumps({
        "positions": n,
        "speed_per_s": n / best_of(3, speed),
        "geofence_per_s": n / best_of(3, geofence),
    }))


if __name__ == "__main__":
    main()
