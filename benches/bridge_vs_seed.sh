#!/usr/bin/env bash
# mfstream's bridge against the Go original (the seed), side by side: the same
# input file, the same native bridge job, the same operation, alternating
# A B A B so that drift in the machine (turbo, page cache, neighbours) falls
# on both sides alike.
#
#   A = target/release/mfstream run --config TMP/engines.toml --engine fast --op mul --arg 1.852 INPUT
#   B = target/seedbench/seedbench e2e --op mul --arg 1.852 INPUT
#
# Both read JSON instants from INPUT and write one JSON event per line to
# stdout (redirected to a file). Prints records/s per run, the medians, the
# ratio A/B, and the seed's engine-level rate (no JSON) as a reference.
#
# Environment:
#   N=2000000  records in the input
#   R=3        rounds (each round runs A then B)
#   JOB=PATH   bridge job for both sides (default: target/release/mfstream-fastjob)
#   ONLY=rust|seed  run one side only (the other is neither built nor run)
set -euo pipefail

N="${N:-2000000}"
R="${R:-3}"
ONLY="${ONLY:-}"
OP=mul
ARG=1.852

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
JOB="${JOB:-$root/target/release/mfstream-fastjob}"

run_rust=1 run_seed=1
case "$ONLY" in
    "") ;;
    rust) run_seed=0 ;;
    seed) run_rust=0 ;;
    *) echo "ONLY must be rust or seed, not '$ONLY'" >&2; exit 2 ;;
esac

# ---- Build. ----
if ((run_rust)); then
    cargo build --release -p mfstream -p mfstream-fastjob
fi
if ((run_seed)); then
    benches/seed/build.sh
fi
if [[ ! -x "$JOB" ]]; then
    echo "bridge job not found or not executable: $JOB" >&2
    exit 1
fi
# The seed splits its command on whitespace (strings.Fields): a job path with
# a space in it would reach it as two words.
if [[ "$JOB" =~ [[:space:]] ]]; then
    echo "the job path must not contain whitespace (the seed splits on it): $JOB" >&2
    exit 1
fi

# ---- Input and configuration. ----
mkdir -p target
tmp="$(mktemp -d "$root/target/bench.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

input="$tmp/input.ndjson"
python3 benches/gen_input.py "$N" "$input"

cat > "$tmp/engines.toml" <<TOML
# Written by benches/bridge_vs_seed.sh: one bridge engine running the native job.
[[engine]]
name = "fast"
description = "native bridge job (benchmark)"
cmd_env = "MFAPI_FAST_CMD"
framing = "value"
TOML
export MFAPI_FAST_CMD="$JOB"   # mfstream's engine "fast"
export MFAPI_FLINK_CMD="$JOB"  # the seed's newFlinkEngine()

# Peak RSS with GNU time when it is there (apt-get install -y time); the
# bench runs without it. ru_maxrss covers the process and the children it has
# reaped: the seed never waits for its job, so its figure is the bridge alone.
timer=""
if [[ -x /usr/bin/time ]] && /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then
    timer=/usr/bin/time
fi

results="$tmp/results.txt"   # lines: side seconds rss_kb
: > "$results"

# timed SIDE OUT CMD...: runs CMD with stdout to OUT, appends its wall time
# and peak RSS to $results.
timed() {
    local side="$1" out="$2"; shift 2
    local t0 t1 rss="-"
    t0="$(date +%s.%N)"
    if [[ -n "$timer" ]]; then
        if ! "$timer" -f %M -o "$tmp/rss" "$@" > "$out"; then
            echo "FAILED ($side): $*" >&2; exit 1
        fi
        rss="$(tail -n 1 "$tmp/rss")"
    else
        if ! "$@" > "$out"; then
            echo "FAILED ($side): $*" >&2; exit 1
        fi
    fi
    t1="$(date +%s.%N)"
    echo "$side $(python3 -c "print($t1 - $t0)") $rss" >> "$results"
    python3 -c "import sys; s=$t1-$t0; print(f'{sys.argv[1]:>5}: {$N/s:12,.0f} records/s  {s:7.3f} s  peak RSS {sys.argv[2]} kB')" "$side" "$rss"
}

# check OUT...: each output has N lines, and its first and last events carry
# the input's first and last timestamps (pairing intact) and agree with each
# other on datetime and value. Values are compared as floats (relative 1e-9),
# so either side may format numbers its own way.
check() {
    python3 - "$N" "$input" "$@" <<'PY'
import json, math, subprocess, sys

n, inp, outs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]

def ends(path):
    first = subprocess.run(["head", "-n", "1", path], capture_output=True, text=True).stdout
    last = subprocess.run(["tail", "-n", "1", path], capture_output=True, text=True).stdout
    return [json.loads(line) for line in (first, last)] if first and last else None

def lines(path):
    return int(subprocess.run(["wc", "-l", path], capture_output=True, text=True).stdout.split()[0])

bad = []
src = ends(inp)
got = {}
for path in outs:
    count = lines(path)
    if count != n:
        bad.append(f"{path}: {count} lines, expected {n}")
        continue
    got[path] = ends(path)
    for which, ev, ins in zip(("first", "last"), got[path], src):
        if ev.get("datetime") != ins["datetime"]:
            bad.append(f"{path}: {which} event datetime {ev.get('datetime')!r}, input has {ins['datetime']!r}")
if len(got) == 2:
    (pa, ea), (pb, eb) = got.items()
    for which, x, y in zip(("first", "last"), ea, eb):
        if x.get("datetime") != y.get("datetime") or not (
            isinstance(x.get("value"), (int, float)) and isinstance(y.get("value"), (int, float))
            and math.isclose(x["value"], y["value"], rel_tol=1e-9)):
            bad.append(f"{which} events differ:\n  {pa}: {json.dumps(x)}\n  {pb}: {json.dumps(y)}")
if bad:
    print("MISMATCH\n" + "\n".join(bad), file=sys.stderr)
    sys.exit(1)
PY
}

# ---- The runs. ----
echo "N=$N records, R=$R rounds, op $OP $ARG, job $JOB"
for ((round = 1; round <= R; round++)); do
    echo "round $round"
    outs=()
    if ((run_rust)); then
        timed rust "$tmp/out_rust.ndjson" \
            target/release/mfstream run --config "$tmp/engines.toml" --engine fast \
            --op "$OP" --arg "$ARG" "$input"
        outs+=("$tmp/out_rust.ndjson")
    fi
    if ((run_seed)); then
        timed seed "$tmp/out_go.ndjson" \
            target/seedbench/seedbench e2e --op "$OP" --arg "$ARG" "$input"
        outs+=("$tmp/out_go.ndjson")
    fi
    check "${outs[@]}" || exit 1
done

# The seed at engine level (instants from memory, events counted, no JSON):
# the ceiling its bridge puts on any control plane, for reference.
seed_engine=""
if ((run_seed)); then
    if ! seed_engine="$(target/seedbench/seedbench engine --op "$OP" --arg "$ARG" --n "$N" 2>&1 >/dev/null)"; then
        echo "FAILED (seed engine level): $seed_engine" >&2; exit 1
    fi
fi

python3 - "$N" "$results" "$seed_engine" <<'PY'
import statistics, sys

n, path, seed_engine = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rates, rss = {}, {}
for line in open(path):
    side, secs, kb = line.split()
    rates.setdefault(side, []).append(n / float(secs))
    if kb != "-":
        rss.setdefault(side, []).append(int(kb))
med = {side: statistics.median(r) for side, r in rates.items()}
print("median end to end (JSON file in, JSON events out):")
names = {"rust": "A mfstream run", "seed": "B seed (Go)  "}
for side in ("rust", "seed"):
    if side in med:
        peak = f", peak RSS {max(rss[side])} kB" if side in rss else ""
        print(f"  {names[side]}: {med[side]:12,.0f} records/s{peak}")
if len(med) == 2:
    print(f"  ratio A/B: {med['rust'] / med['seed']:.2f}")
if seed_engine:
    print(f"seed engine level (no JSON): {seed_engine}")
PY
