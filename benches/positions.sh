#!/bin/sh
# Positions per second through `mfstream run` (the local engine) on one
# file: `speed` (one ellipsoidal geodesic per position) and a geofence
# (enter/exit), a pathological fence (a comb, below), and the same
# trajectory through pymeos when it is installed (`speed()`, and the fence
# as `at(polygon)`; `$MFSTREAM_PYMEOS_PYTHON`, as
# `eval "$(jobs/meos/setup.sh)"` exports it, else `python3`), side by side.
# Figures are printed, not asserted.
#
#   cargo build --release --bin mfstream
#   benches/positions.sh [N]            # N positions, 1,000,000 by default
#   COMB_N=50 benches/positions.sh      # comb sweeps, 200 by default
set -eu
N=${1:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${MFSTREAM:-$ROOT/target/release/mfstream}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release --bin mfstream" >&2; exit 2; }

# A ship's random walk near 51° N, one position a second, in and out of a
# fence: the same file for every run.
python3 - "$N" "$DIR/ship.ndjson" <<'PY'
import random, sys, datetime
n, path = int(sys.argv[1]), sys.argv[2]
random.seed(20)
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
lon, lat = 2.8, 51.2
with open(path, "w") as out:
    for i in range(n):
        lon += random.uniform(-1e-4, 1.2e-4)
        lat += random.uniform(-1e-4, 1e-4)
        if lon > 3.2: lon = 2.8
        t = (t0 + datetime.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.write('{"datetime":"%s","coordinates":[%.7f,%.7f]}\n' % (t, lon, lat))
PY

FENCE='{"type":"Polygon","coordinates":[[[2.9,51.0],[3.0,51.0],[3.0,51.4],[2.9,51.4],[2.9,51.0]]]}'
# The pathological fence: a planar comb of 2,490 teeth (9,963 edges, the
# vertex bound's worth, each tooth spanning the comb's height, so every
# strip of the index holds every edge; integer coordinates keep it under
# the 128 KiB of one command-line argument), and COMB_N positions, each a
# sweep across every tooth (2,490 crossings a segment). The fence's work
# per position is O(edges): a point-in-polygon for the instant and the
# segment's edge tests, plus one per crossing that is not clean.
COMB_N=${COMB_N:-200}
python3 - "$COMB_N" "$DIR/comb.json" "$DIR/sweep.ndjson" <<'PY'
import json, random, sys, datetime
n, fence, track = int(sys.argv[1]), sys.argv[2], sys.argv[3]
teeth = 2490
ring = [[0, 0], [4 * teeth, 0]]
for i in reversed(range(teeth)):
    x = 4 * i
    ring += [[x + 2, 20], [x + 1, 20], [x + 1, 2], [x, 2]]
ring.pop()
ring += [[0, 20], [0, 0]]
json.dump({"type": "Polygon", "coordinates": [ring]}, open(fence, "w"), separators=(",", ":"))
random.seed(20)
t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
with open(track, "w") as out:
    for i in range(n):
        x = -1 if i % 2 == 0 else 4 * teeth + 1
        t = (t0 + datetime.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.write('{"datetime":"%s","coordinates":[%d,%.3f]}\n' % (t, x, random.uniform(5, 15)))
PY
rate() { # name, [--input FILE] [--type TYPE], then the run's arguments
    name=$1; shift
    input=$DIR/ship.ndjson
    type=TGeogPoint
    n=$N
    if [ "$1" = "--input" ]; then input=$2; n=$(wc -l < "$input"); shift 2; fi
    if [ "$1" = "--type" ]; then type=$2; shift 2; fi
    start=$(date +%s.%N)
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f "%U %S" -o "$DIR/cpu" "$BIN" run --type "$type" "$@" "$input" > "$DIR/out"
    else
        "$BIN" run --type "$type" "$@" "$input" > "$DIR/out"
        echo "0 0" > "$DIR/cpu"
    fi
    end=$(date +%s.%N)
    events=$(wc -l < "$DIR/out")
    # Per second of wall time, and per second of CPU (user + system, all
    # threads): the second does not depend on what else the machine runs.
    awk -v n="$n" -v s="$start" -v e="$end" -v name="$name" -v ev="$events" -v cpu="$(cat "$DIR/cpu")" \
        'BEGIN { split(cpu, c, " "); t = c[1] + c[2];
                 printf "%-26s %9.0f positions/s wall, %9.0f per CPU second  (%d positions, %d events, %.2f s wall, %.2f s CPU)\n",
                        name, n / (e - s), (t > 0 ? n / t : 0), n, ev, e - s, t }'
}
echo "mfstream run, local engine ($BIN):"
rate "speed" --op speed
rate "geofence enter/exit" --query "{\"geofence\":$FENCE,\"detect\":[\"enter\",\"exit\"]}"
rate "position (parse + echo)" --op position
rate "geofence, comb sweeps" --input "$DIR/sweep.ndjson" --type TGeomPoint \
    --query "{\"geofence\":$(cat "$DIR/comb.json"),\"detect\":[\"cross\"],\"crs\":\"EPSG:3857\"}"

PY3=${MFSTREAM_PYMEOS_PYTHON:-python3}
if "$PY3" -c 'import pymeos' 2>/dev/null; then
    echo "pymeos, the same trajectory:"
    "$PY3" - "$DIR/ship.ndjson" <<'PY'
import json, sys, time
from pymeos import pymeos_initialize, TGeogPointSeq, TGeogPointInst
pymeos_initialize()
rows = [json.loads(l) for l in open(sys.argv[1])]
# MEOS's timestamp text: `2026-01-01 00:00:00+00`.
stamp = lambda t: t.replace("T", " ").replace("Z", "+00")
text = "[" + ",".join("POINT(%r %r)@%s" % (r["coordinates"][0], r["coordinates"][1], stamp(r["datetime"])) for r in rows) + "]"
start = time.perf_counter()
seq = TGeogPointSeq(text)
speeds = seq.speed()
end = time.perf_counter()
print("%-28s %10.0f positions/s  (%d positions, %.2f s: parse + speed)" % ("pymeos speed", len(rows) / (end - start), len(rows), end - start))
# The geofence: the same fence, lon/lat taken as a plane (as GeoJSON and
# Tile38 draw it), the trajectory restricted to it (`at`: its pieces inside,
# whose ends are the enter and exit events). Up to 200,000 positions: pymeos
# holds the whole sequence.
from pymeos import TGeomPointSeq
from shapely.geometry import Polygon
part = rows[:200000]
text = "[" + ",".join("POINT(%r %r)@%s" % (r["coordinates"][0], r["coordinates"][1], stamp(r["datetime"])) for r in part) + "]"
start = time.perf_counter()
inside = TGeomPointSeq(text).at(Polygon([(2.9, 51.0), (3.0, 51.0), (3.0, 51.4), (2.9, 51.4)]))
end = time.perf_counter()
pieces = inside.num_sequences() if inside is not None else 0
print("%-28s %10.0f positions/s  (%d positions, %.2f s: parse + at(fence), %d pieces inside)" % ("pymeos geofence", len(part) / (end - start), len(part), end - start, pieces))
PY
else
    echo "pymeos: not installed (eval \"\$(jobs/meos/setup.sh)\", or pip install pymeos): skipped"
fi
