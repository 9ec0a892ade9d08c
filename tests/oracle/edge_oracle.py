#!/usr/bin/env python3
"""The geodetic distance from a point to lines and polygon rings, in extended
precision (mpmath, 50 digits): the semantics of MEOS/PostGIS geography
(liblwgeom's `ptarray_distance_spheroid`) computed without rounding, to check
crates/model/src/geo (`cargo test -p mfstream-model --lib geo::oracle`) and the reference job on short edges.

Semantics: edges are great-circle arcs on the unit sphere, the lon/lat taken as
spherical coordinates. Each line's or ring's nearest point to the position is
found on the sphere (liblwgeom's `edge_distance_to_point`: the position
projected on the edge's great circle when that lies between the edge's ends,
else the nearer end); the answer is the ellipsoidal (WGS84) geodesic length
from the position to that point, the latitude read as geodetic; the least
over the lines.

The geodesic is not GeographicLib's: in double precision it errs by about
2 nm however short the line (its reduced latitudes are rounded), which is
1e-6 of a millimetre. Here it is the chord between the two points on the
ellipsoid, computed in 50 digits, lengthened by the arc's curvature:
s = c + k^2 c^3 / 24, k the normal curvature along the chord (Euler's
formula from the meridian and prime-vertical radii at the midpoint). The
terms left out are of order c^5 k^4 and c^4 k k', below 1e-15 m for the
100 m this is used at, and below 1e-9 m up to 10 km. Each result is checked
against GeographicLib (to 1e-8 m + 1e-12 relative) so the formula is checked
on every run.

Input (stdin): NDJSON, one case a line:
    {"point": [lon, lat], "geometry": GEOJSON}     (LineString or Polygon; a
                                                    Polygon's point must be outside)
Output (stdout): NDJSON, one line per case, in order:
    {"truth": metres,                  # this computation
     "meos": metres,                   # pymeos nearest_approach_distance
     "reference": metres}              # jobs/reference/positions.py
"""

import json
import sys
from pathlib import Path

from geographiclib.geodesic import Geodesic
from mpmath import asin, atan2, cos, degrees, mp, mpf, radians, sin, sqrt
from pymeos import TGeogPointInst, pymeos_initialize
from shapely.geometry import shape

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "jobs" / "reference"))
import positions  # noqa: E402  (the reference job's module)

mp.dps = 50
WGS84_A = mpf(6378137)
WGS84_F = 1 / mpf("298.257223563")
WGS84_E2 = WGS84_F * (2 - WGS84_F)


def unit(p):
    lon, lat = radians(mpf(p[0])), radians(mpf(p[1]))
    return [cos(lat) * cos(lon), cos(lat) * sin(lon), sin(lat)]


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def normalize(a):
    n = sqrt(dot(a, a))
    return [x / n for x in a]


def angle(a, b):
    c = cross(a, b)
    return atan2(sqrt(dot(c, c)), dot(a, b))


def nearest_on_arc(p, a, b):
    """(angle, (lon, lat)) of the nearest point to p on the arc a->b."""
    va, vb, vp = unit(a), unit(b), unit(p)
    cands = [(angle(vp, va), a), (angle(vp, vb), b)]
    if a != b:
        n = normalize(cross(va, vb))
        pn = dot(vp, n)
        k = normalize([vp[i] - pn * n[i] for i in range(3)])
        mid = normalize([va[i] + vb[i] for i in range(3)])
        if dot(k, mid) >= dot(va, mid):
            cands.append((angle(vp, k), (degrees(atan2(k[1], k[0])), degrees(asin(k[2])))))
    return min(cands, key=lambda c: c[0])


def ecef(p):
    lon, lat = radians(mpf(p[0])), radians(mpf(p[1]))
    n = WGS84_A / sqrt(1 - WGS84_E2 * sin(lat) ** 2)
    return [n * cos(lat) * cos(lon), n * cos(lat) * sin(lon), n * (1 - WGS84_E2) * sin(lat)]


def short_geodesic(p, q):
    """The WGS84 geodesic length between nearby p and q (see the docstring)."""
    d = [b - a for a, b in zip(ecef(p), ecef(q))]
    c = sqrt(dot(d, d))
    if c == 0:
        return mpf(0)
    lon = radians((mpf(p[0]) + mpf(q[0])) / 2)
    lat = radians((mpf(p[1]) + mpf(q[1])) / 2)
    east = [-sin(lon), cos(lon), 0]
    north = [-sin(lat) * cos(lon), -sin(lat) * sin(lon), cos(lat)]
    de, dn = dot(d, east), dot(d, north)
    w = sqrt(1 - WGS84_E2 * sin(lat) ** 2)
    meridian, prime_vertical = WGS84_A * (1 - WGS84_E2) / w**3, WGS84_A / w
    k = (dn * dn / meridian + de * de / prime_vertical) / (de * de + dn * dn)
    return c + k * k * c**3 / 24


def truth(p, lines):
    best = None
    for line in lines:
        cand = min(
            (nearest_on_arc(p, a, b) for a, b in zip(line, line[1:])),
            key=lambda c: c[0],
        )
        d = short_geodesic(p, cand[1])
        g = Geodesic.WGS84.Inverse(p[1], p[0], float(cand[1][1]), float(cand[1][0]))["s12"]
        if abs(g - float(d)) > 1e-8 + 1e-12 * g:
            raise SystemExit(f"edge_oracle: the short geodesic {d} and GeographicLib's {g} differ")
        best = d if best is None else min(best, d)
    return best


def main():
    pymeos_initialize("UTC")
    space = positions.Space(positions.GEODETIC)
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        p, g = tuple(case["point"]), case["geometry"]
        if g["type"] == "LineString":
            lines = [[tuple(q) for q in g["coordinates"]]]
        elif g["type"] == "Polygon":
            lines = [[tuple(q) for q in ring] for ring in g["coordinates"]]
        else:
            raise SystemExit(f"edge_oracle: a {g['type']} is not a case; send a LineString or Polygon")
        inst = TGeogPointInst(f"POINT({p[0]!r} {p[1]!r})@2026-01-01 00:00:00+00")
        row = {
            "truth": float(truth(p, lines)),
            "meos": inst.nearest_approach_distance(shape(g)),
            "reference": positions.geometry_distance(space, positions.read_geometry(g), p),
        }
        print(json.dumps(row))


if __name__ == "__main__":
    main()
