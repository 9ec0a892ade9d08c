#!/usr/bin/env bash
# Figures for real runtimes behind the bridge, end to end through
# `mfstream run` (release build), one row per runtime:
#
#   benches/runtimes.sh flink spark [beam meos flink-cluster …]
#
# Each runtime NAME is the engine of the shipped engines.toml; its job command
# is read from MFAPI_<NAME>_CMD (and MFAPI_<NAME>_LIBPATH), as set by
# `eval "$(jobs/<name>/setup.sh)"`. A runtime whose variable is unset is
# reported and skipped.
#
# Columns:
#   start s      wall time of `mfstream run --op mul` over 1 record: the job's
#                start-up (JVM, mini-cluster or session) and shutdown; median of R
#   records/s    N records through `mfstream run --op mul --arg 1.852` to
#                /dev/null, divided by (wall time - start): steady rate
#   p50/p99 ms   per-record latency at RATE records/s for SECS seconds: from
#                the write of an instant on mfstream's stdin to the read of
#                its event on mfstream's stdout (first second left out)
#   peak MB      peak resident memory of the largest process of the N-record
#                run (the job's JVM, as /usr/bin/time -v reports it)
#
# Environment: N=1000000 records, R=3 start-up runs, RATE=100, SECS=6.
set -euo pipefail
N="${N:-1000000}"
R="${R:-3}"
RATE="${RATE:-100}"
SECS="${SECS:-6}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
[ $# -gt 0 ] || { echo "usage: benches/runtimes.sh RUNTIME..." >&2; exit 2; }

cargo build --release -q -p mfstream
bin="$root/target/release/mfstream"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 benches/gen_input.py "$N" "$tmp/input.ndjson"
head -1 "$tmp/input.ndjson" > "$tmp/one.ndjson"

rows=()
for rt in "$@"; do
    up="${rt^^}"
    var="MFAPI_${up//-/_}_CMD" # flink-cluster: MFAPI_FLINK_CLUSTER_CMD
    if [ -z "${!var:-}" ]; then
        echo "$rt: $var is not set (eval \"\$(jobs/$rt/setup.sh)\"): skipped" >&2
        continue
    fi
    echo "$rt: measuring ($var=${!var})" >&2
    run=("$bin" run --config "$root/engines.toml" --engine "$rt" --op mul --arg 1.852)
    row=$(python3 - "$rt" "$N" "$R" "$RATE" "$SECS" "$tmp" "${run[@]}" <<'PY'
import statistics, subprocess, sys, threading, time

rt, n, r, rate, secs, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
run = sys.argv[7:]

def timed(cmd, stdin, stdout=subprocess.DEVNULL):
    t = time.monotonic()
    with open(stdin, "rb") as f:
        p = subprocess.run(cmd, stdin=f, stdout=stdout, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit(f"{rt}: {' '.join(cmd)} failed: {p.stderr.decode()[-2000:]}")
    return time.monotonic() - t, p.stderr.decode()

start = statistics.median(timed(run, f"{tmp}/one.ndjson")[0] for _ in range(r))

# The N-record run, under /usr/bin/time -v for the peak RSS.
wall, err = timed(["/usr/bin/time", "-v"] + run, f"{tmp}/input.ndjson")
peak_kb = max(int(l.split(":")[1]) for l in err.splitlines() if "Maximum resident set size" in l)
rate_steady = n / max(wall - start, 1e-9)

# Latency: RATE records/s on a live stdin, each event timed as it is read.
p = subprocess.Popen(run, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
count = int(rate * secs)
sent = [0.0] * count
got = [0.0] * count
def reader():
    for i in range(count):
        line = p.stdout.readline()
        if not line:
            break
        got[i] = time.monotonic()
t = threading.Thread(target=reader)
t.start()
# The first record starts the job: wait for its answer before pacing.
p.stdin.write(b'{"datetime":"2026-01-01T00:00:00Z","value":1}\n'); p.stdin.flush()
sent[0] = time.monotonic()
while got[0] == 0.0:
    time.sleep(0.01)
t0 = time.monotonic()
for i in range(1, count):
    due = t0 + i / rate
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    sent[i] = time.monotonic()
    p.stdin.write(b'{"datetime":"2026-01-01T00:00:%02d.%06dZ","value":%d}\n' % (i // 1000000 % 60, i % 1000000, i))
    p.stdin.flush()
p.stdin.close()
t.join()
p.wait()
skip = int(rate)  # the first second: the JIT warming up
lat = sorted((got[i] - sent[i]) * 1000 for i in range(skip, count) if got[i])
if len(lat) < count - skip:
    sys.exit(f"{rt}: {count - skip - len(lat)} records of the latency run got no answer")
p50 = lat[len(lat) // 2]
p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
print(f"| {rt} | {start:.2f} | {rate_steady:,.0f} | {p50:.2f} | {p99:.2f} | {peak_kb / 1024:.0f} |")
PY
)
    rows+=("$row")
done

echo
echo "N=$N records (mul 1.852, in the framing engines.toml gives each engine), latency at $RATE records/s, $(nproc) cores, $(date -u +%F)"
echo
echo "| runtime | start s | records/s | p50 ms | p99 ms | peak MB |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
