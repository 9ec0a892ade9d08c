"""Position queries for the reference job: the per-instant part of a query on
a feature's positions (jobs/README.md, "Positions"), with the semantics of
mfstream's `local` engine (crates/model/src/geo/), written again from its description.

- A step is one of `speed`, `azimuth`, `cumulativeLength`, `distance`
  (to MFSTREAM_QUERY's "geometry"), `position`, or `geofence` (MFSTREAM_QUERY's
  "geofence" and "detect"), in MFSTREAM_QUERY's "crs": "EPSG:4326" is
  geodetic lon/lat (metres on the WGS84 ellipsoid, GeographicLib's
  geodesics), any other "EPSG:NNNN" planar (Euclid, in its units).
- Geodesics need the `geographiclib` package (PyPI, pure Python), imported
  only for a geodetic query; everything else is the standard library.
- A record's answers end with exactly one line: `{"datetime","value"}`,
  `{"datetime","coordinates"}`, `{"datetime"}` alone (no answer), or an error
  line; a geofence's `{"datetime","coordinates","detect"}` lines come before
  its record's end line.
"""

import math

from windows import parse_datetime

GEODETIC = "EPSG:4326"
STEPS = ("speed", "azimuth", "cumulativeLength", "distance", "position", "geofence")
DETECT = ("enter", "exit", "inside", "outside", "cross")


class NoPosition(ValueError):
    """A record that cannot be measured: no result for it."""


def wgs84():
    """GeographicLib's WGS84 geodesic, or an ImportError saying what to install."""
    try:
        from geographiclib.geodesic import Geodesic
    except ImportError as e:
        raise ImportError(
            f"geodetic position queries need the geographiclib package ({e}): "
            "pip install geographiclib (jobs/meos/setup.sh puts it in the pymeos venv)"
        ) from None
    return Geodesic.WGS84


def normalize_degrees(deg):
    """An angle in [0, 360)."""
    d = deg % 360.0
    return 0.0 if d >= 360.0 else d


class Space:
    """How positions of one reference system are measured."""

    def __init__(self, crs):
        self.geodetic = crs == GEODETIC
        self.geod = wgs84() if self.geodetic else None

    def check(self, x, y):
        """Raises NoPosition unless (x, y) is a position of the system."""
        for c in (x, y):
            if not math.isfinite(c):
                raise NoPosition(f"coordinates: {c!r} is not a finite number")
        if self.geodetic:
            if not -180.0 <= x <= 180.0:
                raise NoPosition(f"coordinates: longitude {x!r} is outside [-180, 180]")
            if not -90.0 <= y <= 90.0:
                raise NoPosition(f"coordinates: latitude {y!r} is outside [-90, 90]")

    def distance_azimuth(self, a, b):
        """The length from a to b and the azimuth at a, degrees clockwise from
        north in [0, 360), None when a == b."""
        if a == b:
            return 0.0, None
        if self.geodetic:
            g = self.geod.Inverse(a[1], a[0], b[1], b[0])
            return g["s12"], normalize_degrees(g["azi1"])
        dx, dy = b[0] - a[0], b[1] - a[1]
        return math.hypot(dx, dy), normalize_degrees(math.degrees(math.atan2(dx, dy)))

    def distance(self, a, b):
        if self.geodetic:
            return self.geod.Inverse(a[1], a[0], b[1], b[0])["s12"]
        return math.hypot(b[0] - a[0], b[1] - a[1])


# -- GeoJSON geometries ------------------------------------------------------


def read_geometry(g):
    """(kind, parts) of a GeoJSON geometry the host checked: kind "points"
    (a list of (x, y)), "lines" (a list of lists) or "polygons" (a list of
    polygons, each a list of closed rings)."""
    kind, c = g["type"], g["coordinates"]

    def pos(p):
        return (float(p[0]), float(p[1]))

    def line(ps):
        return [pos(p) for p in ps]

    if kind == "Point":
        return "points", [pos(c)]
    if kind == "MultiPoint":
        return "points", [pos(p) for p in c]
    if kind == "LineString":
        return "lines", [line(c)]
    if kind == "MultiLineString":
        return "lines", [line(ls) for ls in c]
    if kind == "Polygon":
        return "polygons", [[line(r) for r in c]]
    if kind == "MultiPolygon":
        return "polygons", [[line(r) for r in poly] for poly in c]
    raise ValueError(f"unsupported geometry type {kind!r}")


# Planar predicates (lon/lat taken as a plane, as GeoJSON and Tile38 draw a fence).


def orient(a, b, p):
    return (b[0] - a[0]) * (p[1] - a[1]) - (p[0] - a[0]) * (b[1] - a[1])


def within(v, a, b):
    return min(a, b) <= v <= max(a, b)


def polygon_loc(rings, p):
    """"inside", "boundary" or "outside", by the even-odd crossing number over
    every ring's edges, with exact boundary detection."""
    inside = False
    for ring in rings:
        for a, b in zip(ring, ring[1:]):
            o = orient(a, b, p)
            if o == 0.0 and within(p[0], a[0], b[0]) and within(p[1], a[1], b[1]):
                return "boundary"
            if (a[1] <= p[1] < b[1] and o > 0.0) or (b[1] <= p[1] < a[1] and o < 0.0):
                inside = not inside
    return "inside" if inside else "outside"


def segment_hits(a, b, c, d, out):
    """Parameters s in [0, 1] along a->b where it meets the edge c->d."""
    rx, ry = b[0] - a[0], b[1] - a[1]
    qx, qy = d[0] - c[0], d[1] - c[1]
    wx, wy = c[0] - a[0], c[1] - a[1]
    denom = rx * qy - ry * qx
    if denom != 0.0:
        s = (wx * qy - wy * qx) / denom
        u = (wx * ry - wy * rx) / denom
        if 0.0 <= s <= 1.0 and 0.0 <= u <= 1.0:
            out.append(s)
        return
    rr = rx * rx + ry * ry
    if wx * ry - wy * rx != 0.0 or rr == 0.0:
        return
    sc = (wx * rx + wy * ry) / rr
    sd = ((d[0] - a[0]) * rx + (d[1] - a[1]) * ry) / rr
    lo, hi = max(min(sc, sd), 0.0), min(max(sc, sd), 1.0)
    if lo <= hi:
        out.append(lo)
        out.append(hi)


def segment_distance(p, a, b):
    rx, ry = b[0] - a[0], b[1] - a[1]
    rr = rx * rx + ry * ry
    s = 0.0 if rr == 0.0 else min(max(((p[0] - a[0]) * rx + (p[1] - a[1]) * ry) / rr, 0.0), 1.0)
    return math.hypot(p[0] - (a[0] + s * rx), p[1] - (a[1] + s * ry))


def lerp(a, b, s):
    return (a[0] + s * (b[0] - a[0]), a[1] + s * (b[1] - a[1]))


def planar_lines(p, lines):
    best = math.inf
    for line in lines:
        if len(line) == 1:
            best = min(best, math.hypot(p[0] - line[0][0], p[1] - line[0][1]))
        for a, b in zip(line, line[1:]):
            best = min(best, segment_distance(p, a, b))
    return best


# Geography on the unit sphere, as PostGIS's liblwgeom (and so MEOS) measures
# a point's distance to lines and polygons: the nearest point of each line or
# ring found on the sphere (great-circle edges), then the ellipsoidal distance
# to it, the least over them; 0 inside a polygon.


def to_v3(p):
    lon, lat = math.radians(p[0]), math.radians(p[1])
    return (math.cos(lat) * math.cos(lon), math.cos(lat) * math.sin(lon), math.sin(lat))


def to_point(v):
    # atan2 rather than asin: asin loses digits near the poles.
    return (math.degrees(math.atan2(v[1], v[0])), math.degrees(math.atan2(v[2], math.hypot(v[0], v[1]))))


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def normalize(a):
    n = math.sqrt(dot(a, a))
    return (a[0] / n, a[1] / n, a[2] / n) if n > 0.0 and math.isfinite(n) else None


def angle(a, b):
    c = cross(a, b)
    return math.atan2(math.sqrt(dot(c, c)), dot(a, b))


def lon_diff(a, b):
    """b - a in degrees, in [-180, 180], to the precision of the difference
    itself: across the antimeridian both are moved by 180 exactly first."""
    d = b - a
    if d > 180.0:
        return (b - 180.0) - (a + 180.0)
    if d < -180.0:
        return (b + 180.0) - (a - 180.0)
    return d


def edge_normal(a, b):
    """a x b for lon/lat points a, b, as liblwgeom's robust_cross_product:
    from the sines of the half-sums and half-differences of the longitudes
    and latitudes, whose differences are taken in degrees first. The plain
    cross product of two nearly equal unit vectors cancels (near edges of
    10 m to 5 km the distance erred by up to 0.17 mm); this one keeps the
    relative precision of the differences (crates/model/src/geo/sphere.rs)."""
    dlon = lon_diff(a[0], b[0])
    s = math.radians(a[0] + dlon / 2.0)
    h = math.radians(dlon / 2.0)
    sin_dlat = math.sin(math.radians(a[1] - b[1]))
    sin_slat = math.sin(math.radians(a[1] + b[1]))
    sin_s, cos_s, sin_h, cos_h = math.sin(s), math.cos(s), math.sin(h), math.cos(h)
    return (
        -sin_dlat * sin_s * cos_h - sin_slat * cos_s * sin_h,
        sin_dlat * cos_s * cos_h - sin_slat * sin_s * sin_h,
        math.cos(math.radians(a[1])) * math.cos(math.radians(b[1])) * 2.0 * sin_h * cos_h,
    )


def nearest_on_arc(p, a, b, va, vb):
    """The nearest point to p (a unit vector) on the arc a->b (lon/lat, and
    their unit vectors va, vb) and its angle from p (liblwgeom's
    edge_distance_to_point)."""
    best = ((0.0, 0.0, 0.0), math.inf)
    n = normalize(edge_normal(a, b))
    if n is not None:
        # p's height over the plane, measured from a (on it): p . n would
        # add n's rounding times a's distance from the origin.
        pn = dot((p[0] - va[0], p[1] - va[1], p[2] - va[2]), n)
        k = normalize((p[0] - pn * n[0], p[1] - pn * n[1], p[2] - pn * n[2]))
        if k is not None:
            mid = normalize((va[0] + vb[0], va[1] + vb[1], va[2] + vb[2]))
            if mid is not None and dot(k, mid) >= dot(va, mid):
                best = (k, angle(p, k))
    for end in (va, vb):
        d = angle(p, end)
        if d < best[1]:
            best = (end, d)
    return best


def sphere_lines_distance(space, p, lines):
    pv = to_v3(p)
    best_distance = math.inf
    for line in lines:
        vs = [to_v3(q) for q in line]
        if not vs:
            continue
        best = (vs[0], angle(pv, vs[0]))
        for i in range(1, len(vs)):
            cand = nearest_on_arc(pv, line[i - 1], line[i], vs[i - 1], vs[i])
            if cand[1] < best[1]:
                best = cand
        best_distance = min(best_distance, space.distance(p, to_point(best[0])))
    return best_distance


def meridian_crosses(p, a, b):
    lon = math.radians(p[0])
    m = (-math.sin(lon), math.cos(lon), 0.0)
    va, vb = to_v3(a), to_v3(b)
    da, db = dot(va, m), dot(vb, m)
    if (da > 0.0) == (db > 0.0):
        return False
    s = da / (da - db)
    x = (va[0] + s * (vb[0] - va[0]), va[1] + s * (vb[1] - va[1]), va[2] + s * (vb[2] - va[2]))
    east = (math.cos(lon), math.sin(lon), 0.0)
    if dot(x, east) <= 0.0:
        return False
    return math.atan2(x[2], dot(x, east)) > math.radians(p[1])


def sphere_polygon_covers(rings, p):
    crossings = 0
    for ring in rings:
        crossings += sum(1 for a, b in zip(ring, ring[1:]) if meridian_crosses(p, a, b))
    return crossings % 2 == 1


def geometry_distance(space, geometry, p):
    kind, parts = geometry
    if kind == "points":
        return min(space.distance(p, q) for q in parts)
    if kind == "lines":
        return sphere_lines_distance(space, p, parts) if space.geodetic else planar_lines(p, parts)
    if space.geodetic:
        if any(sphere_polygon_covers(rings, p) for rings in parts):
            return 0.0
        return sphere_lines_distance(space, p, [r for rings in parts for r in rings])
    if any(polygon_loc(rings, p) != "outside" for rings in parts):
        return 0.0
    return planar_lines(p, [r for rings in parts for r in rings])


# -- Geofences (Tile38's WITHIN … DETECT) -------------------------------------


class Fence:
    """A Polygon or MultiPolygon and the kinds it detects; one feature's side."""

    def __init__(self, geometry, detect):
        kind, self.polygons = read_geometry(geometry)
        if kind != "polygons":
            raise ValueError(f"a {geometry['type']} cannot be a fence")
        if not detect or any(d not in DETECT for d in detect):
            raise ValueError(f"detect: expected names among {', '.join(DETECT)}, got {detect!r}")
        self.detect = set(detect)
        xs = [p[0] for poly in self.polygons for r in poly for p in r]
        ys = [p[1] for poly in self.polygons for r in poly for p in r]
        self.bbox = (min(xs), min(ys), max(xs), max(ys))
        self.last = None

    def covers(self, p):
        b = self.bbox
        if p[0] < b[0] or p[0] > b[2] or p[1] < b[1] or p[1] > b[3]:
            return False
        return any(polygon_loc(rings, p) != "outside" for rings in self.polygons)

    def step(self, t, p):
        """The (t, point, detect) events of the instant (t, p), in order."""
        out = []
        inside = self.covers(p)
        if self.last is not None:
            self.segment(self.last, (t, p, inside), out)
        self.last = (t, p, inside)
        self.emit(out, t, p, "inside" if inside else "outside")
        return out

    def emit(self, out, t, p, detect):
        if detect in self.detect:
            out.append((t, p, detect))

    def segment(self, start, end, out):
        (t0, p0, inside0), (t1, p1, inside1) = start, end
        if not self.detect & {"enter", "exit", "cross"}:
            return
        b = self.bbox
        if (max(p0[0], p1[0]) < b[0] or min(p0[0], p1[0]) > b[2]
                or max(p0[1], p1[1]) < b[1] or min(p0[1], p1[1]) > b[3]):
            return
        hits = []
        for rings in self.polygons:
            for ring in rings:
                for c, d in zip(ring, ring[1:]):
                    segment_hits(p0, p1, c, d, hits)
        if not hits:
            return
        hits.sort()
        # A crossing through a vertex hits both its edges: merged.
        merged = [hits[0]]
        for h in hits[1:]:
            if abs(h - merged[-1]) > 1e-12:
                merged.append(h)
        side, an_end_inside, frm = inside0, inside0 or inside1, 0.0
        for to in merged + [1.0]:
            next_side = self.covers(lerp(p0, p1, (frm + to) / 2.0)) if to > frm else side
            if next_side != side:
                self.crossing(t0, p0, t1, p1, frm, next_side, an_end_inside, out)
                side = next_side
            frm = to
        if side != inside1:
            self.crossing(t0, p0, t1, p1, 1.0, inside1, an_end_inside, out)

    def crossing(self, t0, p0, t1, p1, s, entering, an_end_inside, out):
        # Rounded half away from zero (s * dt >= 0), as Rust's f64::round.
        t = t0 + math.floor(s * float(t1 - t0) + 0.5)
        point = lerp(p0, p1, s)
        if an_end_inside:
            self.emit(out, t, point, "enter" if entering else "exit")
        elif entering:
            self.emit(out, t, point, "cross")


def format_micros(micros):
    """RFC 3339 UTC with as many fraction digits as needed (none, 3 or 6), as
    mfstream writes a moment it computed."""
    secs, fraction = divmod(micros, 1_000_000)
    days, of_day = divmod(secs, 86_400)
    # Howard Hinnant's civil_from_days.
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    out = f"{year:04}-{month:02}-{day:02}T{of_day // 3600:02}:{of_day // 60 % 60:02}:{of_day % 60:02}"
    if fraction and fraction % 1000 == 0:
        out += f".{fraction // 1000:03}"
    elif fraction:
        out += f".{fraction:06}"
    return out + "Z"


# -- The step -----------------------------------------------------------------


class Step:
    """One position query's per-instant part, fed one feature's instants in
    time order: `push(datetime, coordinates)` returns the records' answer
    lines as dicts (the last one ends the record), or raises NoPosition."""

    def __init__(self, name, query):
        if name not in STEPS:
            raise ValueError(f"unknown position step {name!r}: supported are {', '.join(STEPS)}")
        self.name = name
        self.space = Space(query.get("crs", GEODETIC))
        self.last_t = None
        self.last_p = None
        self.length = 0.0
        self.geometry = read_geometry(query["geometry"]) if name == "distance" else None
        self.fence = Fence(query["geofence"], query.get("detect", list(DETECT))) if name == "geofence" else None

    def push(self, datetime, coordinates):
        if not (isinstance(coordinates, list) and len(coordinates) in (2, 3)
                and all(type(c) in (int, float) for c in coordinates)):
            raise NoPosition(f"coordinates: expected [x, y] or [x, y, z], got {coordinates!r}")
        x, y = float(coordinates[0]), float(coordinates[1])
        self.space.check(x, y)
        ns = parse_datetime(datetime)
        if ns is None:
            raise NoPosition(f"not an ISO-8601 datetime: {datetime!r}")
        t = ns // 1000
        if self.last_t is not None and t <= self.last_t:
            raise NoPosition(f"{datetime} is not after the previous position: datetimes must increase")
        p = (x, y)
        t0, p0 = self.last_t, self.last_p
        self.last_t, self.last_p = t, p
        if self.name == "position":
            return [{"datetime": datetime, "coordinates": [float(c) for c in coordinates]}]
        if self.name == "distance":
            return [{"datetime": datetime, "value": geometry_distance(self.space, self.geometry, p)}]
        if self.name == "geofence":
            lines = [
                {"datetime": datetime if te == t else format_micros(te),
                 "coordinates": [pt[0], pt[1]], "detect": d}
                for te, pt, d in self.fence.step(t, p)
            ]
            return lines + [{"datetime": datetime}]
        # A measure of the segment ending here: none at the first instant.
        if t0 is None:
            return [{"datetime": datetime, "value": 0.0}] if self.name == "cumulativeLength" else [{"datetime": datetime}]
        length, azimuth = self.space.distance_azimuth(p0, p)
        self.length += length
        value = {
            "speed": length / (float(t - t0) / 1e6),
            "azimuth": azimuth,
            "cumulativeLength": self.length,
        }[self.name]
        return [{"datetime": datetime} if value is None else {"datetime": datetime, "value": value}]
