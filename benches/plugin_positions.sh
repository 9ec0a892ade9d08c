#!/bin/sh
# Positions per second of a position query on the `local` engine and on the
# `meos` plugin (MEOS's tgeogpoint functions behind plugin ABI version 3),
# side by side, through `mfstream run` on one file: `speed` (one geodesic
# per position) and a geofence (enter/exit). Figures are printed, with the
# ratio local / meos; nothing is asserted (the goal: local >= 2x meos).
#
#   cargo build --release --bin mfstream && cargo build --release -p mfstream-plugin-meos
#   eval "$(jobs/meos/setup.sh)"          # MFSTREAM_MEOS_LIB
#   benches/plugin_positions.sh [N]       # N positions, 200,000 by default
set -eu
N=${1:-200000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${MFSTREAM:-$ROOT/target/release/mfstream}
PLUGIN=${MFSTREAM_MEOS_PLUGIN:-$ROOT/target/release/libmfstream_plugin_meos.so}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release --bin mfstream" >&2; exit 2; }
[ -f "$PLUGIN" ] || { echo "no $PLUGIN: cargo build --release -p mfstream-plugin-meos" >&2; exit 2; }
[ -n "${MFSTREAM_MEOS_LIB:-}" ] || { echo "MFSTREAM_MEOS_LIB is not set: eval \"\$(jobs/meos/setup.sh)\"" >&2; exit 2; }
printf '[[plugin]]\npath = "%s"\n' "$PLUGIN" > "$DIR/engines.toml"

# A ship's random walk near 51 N, one position a second, in and out of a
# fence (the trajectory of benches/positions.sh).
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
# Positions per CPU second (user + system) of one run: the machine's other
# load does not change it as it changes wall time. Prints the rate.
rate() { # engine, then the run's arguments
    engine=$1; shift
    /usr/bin/time -f "%e %U %S" -o "$DIR/cpu" "$BIN" run --config "$DIR/engines.toml" \
        --engine "$engine" --type TGeogPoint "$@" "$DIR/ship.ndjson" > "$DIR/out"
    awk -v n="$N" -v ev="$(wc -l < "$DIR/out")" -v cpu="$(cat "$DIR/cpu")" -v engine="$engine" \
        'BEGIN { split(cpu, c, " "); t = c[2] + c[3];
                 printf "  %-6s %9.0f positions/s per CPU second, %9.0f wall  (%d events, %.2f s CPU)\n",
                        engine, n / t, n / c[1], ev, t > "/dev/stderr"; printf "%.0f", n / t }'
}
compare() { # name, then the run's arguments
    name=$1; shift
    echo "$name ($N positions):"
    local_rate=$(rate local "$@")
    meos_rate=$(rate meos "$@")
    awk -v l="$local_rate" -v m="$meos_rate" 'BEGIN { printf "  local / meos = %.1fx\n", l / m }'
}
compare "speed" --op speed 2>&1
compare "geofence enter/exit" --query "{\"geofence\":$FENCE,\"detect\":[\"enter\",\"exit\"]}" 2>&1
