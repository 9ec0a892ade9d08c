#!/usr/bin/env python3
"""Expected position results from independent implementations: pymeos (MEOS),
GeographicLib and shapely. Used by crates/model/src/geo/oracle/ (cargo test -p mfstream-model --lib geo::oracle), and usable on its own
to check `mfstream run` or `serve` output end to end.

Input (stdin): NDJSON, one instant a line, in time order per feature:
    {"datetime": "2026-01-01T00:00:00.5Z", "coordinates": [lon, lat], "feature": "f1"}
("feature" is optional: one feature when absent.)

Options:
    --crs EPSG:4326|EPSG:NNNN   geodetic (tgeogpoint, default) or planar (tgeompoint)
    --geometry GEOJSON          a static geometry to measure `distance` to (repeatable)
    --fence GEOJSON             a Polygon/MultiPolygon geofence (Tile38 events, by shapely)
    --window SECONDS            tumbling windows aligned to the epoch, for the aggregates
    --hop SECONDS               with --window: hopping windows [end - window, end), one per
                                epoch-aligned multiple `end` of the hop that holds instants
(GEOJSON is the text itself, or @FILE.)

Output (stdout): NDJSON, per feature in input order:
    {"kind": "instant", "feature", "index", "datetime", "t_us",
     "speed", "azimuth", "cumulativeLength",        # pymeos, of the segment ending here
     "geodesic_length", "geodesic_azimuth",          # GeographicLib (geodetic) or math (planar)
     "distance": [one per --geometry]}               # pymeos nearest_approach_distance
    {"kind": "event", "feature", "t_us", "datetime", "coordinates", "detect"}
    {"kind": "window", "feature", "start_us", "count", "extent", "centroid",
     "length", "avg_speed", "max_speed",           # pymeos
     "extent_plain", "centroid_exact"}              # plain min/max, exact rational arithmetic
null where a value does not exist (first instant, a stop's azimuth, one-instant speeds).

Semantics (the ones crates/model/src/geo documents):
- speed/azimuth/length of the segment ending at an instant: pymeos on the two-instant
  sequence [previous, this] (MEOS normalises longer sequences, and its value at a
  sub-second timestamp is unreliable); azimuth converted from radians to degrees.
- cumulativeLength: the sum of those segments' pymeos lengths.
- fence: lon/lat as a plane (shapely). Per instant inside/outside (covers); along each
  segment, the pieces of segment ∩ polygon: an enter at a piece's start and an exit at its
  end (unless at the segment's ends), or, when both instants are outside, one cross per
  piece at its start. Time interpolated linearly along the segment, rounded to the µs.
- windows: the window's instants as one pymeos sequence (not normalised): num instants, bounding box,
  time_weighted_centroid, length, speed().time_weighted_average() (= length / duration),
  speed().max_value().
"""

import argparse
import json
import math
import sys
from collections import OrderedDict
from datetime import datetime, timezone
from fractions import Fraction

from geographiclib.geodesic import Geodesic
from pymeos import (
    TGeogPointInst,
    TGeogPointSeq,
    TGeomPointInst,
    TGeomPointSeq,
    pymeos_initialize,
)
from shapely.geometry import LineString, Point, shape

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def micros(text):
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    d = dt - EPOCH
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


def meos_time(us):
    secs, frac = divmod(us, 1_000_000)
    dt = datetime.fromtimestamp(secs, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%S") + f".{frac:06d}+00"


def iso(us):
    secs, frac = divmod(us, 1_000_000)
    dt = datetime.fromtimestamp(secs, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:06d}Z"


def geojson_arg(text):
    if text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    return shape(json.loads(text))


class Meos:
    def __init__(self, geodetic):
        self.geodetic = geodetic
        self.Seq = TGeogPointSeq if geodetic else TGeomPointSeq
        self.Inst = TGeogPointInst if geodetic else TGeomPointInst

    @staticmethod
    def wkt(p):
        return f"POINT({p[0]!r} {p[1]!r})"

    def seq(self, instants):
        # Not normalised: MEOS merges nearly collinear segments (within a
        # tolerance), which moves the time-weighted centroid and the speeds.
        return self.Seq(
            instant_list=[self.inst(t, p) for t, p in instants],
            lower_inc=True,
            upper_inc=True,
            normalize=False,
        )

    def inst(self, t, p):
        return self.Inst(f"{self.wkt(p)}@{meos_time(t)}")


def segment_geodesic(geodetic, p0, p1):
    if geodetic:
        g = Geodesic.WGS84.Inverse(p0[1], p0[0], p1[1], p1[0])
        length, azi = g["s12"], g["azi1"]
    else:
        dx, dy = p1[0] - p0[0], p1[1] - p0[1]
        length, azi = math.hypot(dx, dy), math.degrees(math.atan2(dx, dy))
    if p0 == p1:
        return length, None
    return length, azi % 360.0


def instants_out(meos, feature, track, geometries):
    total = 0.0
    for i, (t, p) in enumerate(track):
        row = {"kind": "instant", "feature": feature, "index": i, "datetime": iso(t), "t_us": t}
        if i == 0:
            row.update(speed=None, azimuth=None, cumulativeLength=0.0,
                       geodesic_length=None, geodesic_azimuth=None)
        else:
            seg = meos.seq([track[i - 1], (t, p)])
            speed = seg.speed()
            azimuth = seg.azimuth()
            total += seg.length()
            gl, ga = segment_geodesic(meos.geodetic, track[i - 1][1], p)
            row.update(
                speed=speed.start_value() if speed is not None else None,
                azimuth=math.degrees(azimuth.start_value()) if azimuth is not None else None,
                cumulativeLength=total,
                geodesic_length=gl,
                geodesic_azimuth=ga,
            )
        if geometries:
            inst = meos.inst(t, p)
            row["distance"] = [inst.nearest_approach_distance(g) for g in geometries]
        print(json.dumps(row))


def fence_out(feature, track, fence):
    def event(t, xy, detect):
        print(json.dumps({"kind": "event", "feature": feature, "t_us": t, "datetime": iso(t),
                          "coordinates": list(xy), "detect": detect}))

    prev = None
    for t, p in track:
        inside = fence.covers(Point(p))
        if prev is not None:
            t0, p0, inside0 = prev
            seg = LineString([p0, p])
            pieces = []
            if p0 != p:
                inter = seg.intersection(fence)
                parts = getattr(inter, "geoms", [inter])
                for part in parts:
                    if part.geom_type == "LineString" and not part.is_empty:
                        a, b = part.coords[0], part.coords[-1]
                        sa, sb = seg.project(Point(a), normalized=True), seg.project(Point(b), normalized=True)
                        if sa > sb:
                            (sa, a), (sb, b) = (sb, b), (sa, a)
                        pieces.append((sa, a, sb, b))
                pieces.sort()
            for sa, a, sb, b in pieces:
                at = lambda s: t0 + round(s * (t - t0))
                if not inside0 and not inside:
                    event(at(sa), a, "cross")
                    continue
                if sa > 0.0:
                    event(at(sa), a, "enter")
                if sb < 1.0:
                    event(at(sb), b, "exit")
        event(t, p, "inside" if inside else "outside")
        prev = (t, p, inside)


def exact_centroid(inst):
    duration = inst[-1][0] - inst[0][0]
    if duration == 0:
        return [float(sum(Fraction(p[k]) for _, p in inst) / len(inst)) for k in (0, 1)]
    integral = [Fraction(0), Fraction(0)]
    for (t0, p0), (t1, p1) in zip(inst, inst[1:]):
        for k in (0, 1):
            integral[k] += (Fraction(p0[k]) + Fraction(p1[k])) / 2 * (t1 - t0)
    return [float(i / duration) for i in integral]


def windows_out(meos, feature, track, window_us, hop_us=None):
    groups = OrderedDict()
    if hop_us is None:
        for t, p in track:
            groups.setdefault(t // window_us * window_us, []).append((t, p))
    else:
        # Every window end from the first instant's first window to the
        # last instant's last, in order; empty windows are not emitted.
        end = track[0][0] // hop_us * hop_us + hop_us
        while end - window_us <= track[-1][0]:
            inst = [(t, p) for t, p in track if end - window_us <= t < end]
            if inst:
                groups[end - window_us] = inst
            end += hop_us
    for start, inst in groups.items():
        xs = [p[0] for _, p in inst]
        ys = [p[1] for _, p in inst]
        row = {"kind": "window", "feature": feature, "start_us": start, "count": len(inst)}
        if len(inst) == 1:
            t, p = inst[0]
            row.update(extent=[p[0], p[1], p[0], p[1]], centroid=list(p), length=0.0,
                       avg_speed=None, max_speed=None)
        else:
            seq = meos.seq(inst)
            box = seq.bounding_box()
            c = seq.time_weighted_centroid()
            speed = seq.speed()
            row.update(
                extent=[box.xmin(), box.ymin(), box.xmax(), box.ymax()],
                centroid=[c.x, c.y],
                length=seq.length(),
                avg_speed=speed.time_weighted_average(),
                max_speed=speed.max_value(),
            )
        # Independent of MEOS: the plain extent, and the time-weighted
        # centroid in exact rational arithmetic (MEOS's twCentroid drifts by
        # up to ~1e-8 degrees around very short stops).
        row["extent_plain"] = [min(xs), min(ys), max(xs), max(ys)]
        row["centroid_exact"] = exact_centroid(inst)
        print(json.dumps(row))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--crs", default="EPSG:4326")
    ap.add_argument("--geometry", action="append", default=[])
    ap.add_argument("--fence")
    ap.add_argument("--window", type=float)
    ap.add_argument("--hop", type=float)
    args = ap.parse_args()
    geodetic = args.crs.upper() in ("EPSG:4326", "OGC:CRS84")
    pymeos_initialize("UTC")
    meos = Meos(geodetic)
    geometries = [geojson_arg(g) for g in args.geometry]
    fence = geojson_arg(args.fence) if args.fence else None

    tracks = OrderedDict()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        v = json.loads(line)
        x, y = v["coordinates"][:2]
        tracks.setdefault(str(v.get("feature", "")), []).append((micros(v["datetime"]), (float(x), float(y))))
    for feature, track in tracks.items():
        instants_out(meos, feature, track, geometries)
        if fence is not None:
            fence_out(feature, track, fence)
        if args.window:
            hop = round(args.hop * 1_000_000) if args.hop else None
            windows_out(meos, feature, track, round(args.window * 1_000_000), hop)


if __name__ == "__main__":
    main()
