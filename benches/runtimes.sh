#!/usr/bin/env bash
# Figures for real runtimes, end to end through `mfstream run` and the shipped
# engines.toml:
#
#     eval "$(jobs/beam/setup.sh)"; eval "$(jobs/meos/setup.sh)"
#     benches/runtimes.sh beam meos
#
# For each runtime named (its engine reads MFAPI_<NAME>_CMD and, where set,
# MFAPI_<NAME>_LIBPATH), it prints:
#
# - start-up: wall time of `mfstream run --op abs` over one instant (job start,
#   answer, exit), median of 3;
# - steady records/s: N instants (N=${N:-200000}) through `mfstream run --op mul
#   --arg 1.852` to /dev/null: N / (wall time − start-up), and the raw N / wall;
# - latency: 300 instants written one by one at 100 per second to a running
#   `mfstream run`, each timed from its write to its event's line on stdout;
#   p50 / p99 / max;
# - peak memory: the job's own peak RSS over the same N records (the job run
#   directly, value framing, with the engine's library path).
#
# Figures are printed, not asserted.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -eq 0 ]; then
    echo "usage: benches/runtimes.sh RUNTIME..., e.g. benches/runtimes.sh beam meos" >&2
    exit 2
fi
cargo build --release --quiet --bin mfstream
exec python3 - "$@" <<'EOF'
import os, shlex, statistics, subprocess, sys, time, resource

N = int(os.environ.get("N", "200000"))
MFSTREAM = os.path.abspath("target/release/mfstream")
tmp = os.environ.get("TMPDIR", "/tmp")
ndjson = os.path.join(tmp, f"mfstream-bench-{N}.ndjson")
values = os.path.join(tmp, f"mfstream-bench-{N}.txt")
if not os.path.exists(ndjson) or not os.path.exists(values):
    with open(ndjson, "w") as j, open(values, "w") as v:
        for i in range(N):
            x = (i * 7919 % 10007) / 100.0 + 0.01
            j.write(f'{{"datetime":"2026-01-01T00:00:00.{i:06d}Z","value":{x!r}}}\n')
            v.write(f"{x!r}\n")


def run(rt, op, inp, out=subprocess.DEVNULL):
    cmd = [MFSTREAM, "run", "--engine", rt, "--property", "speed", "--op", op]
    if op == "mul":
        cmd += ["--arg", "1.852"]
    start = time.perf_counter()
    subprocess.run(cmd, stdin=inp, stdout=out, check=True)
    return time.perf_counter() - start


def startup(rt):
    one = os.path.join(tmp, "mfstream-bench-one.ndjson")
    with open(one, "w") as f:
        f.write('{"datetime":"2026-01-01T00:00:00Z","value":-1.5}\n')
    times = []
    for _ in range(3):
        with open(one) as inp:
            times.append(run(rt, "abs", inp))
    return statistics.median(times)


def latency(rt):
    cmd = [MFSTREAM, "run", "--engine", rt, "--property", "speed", "--op", "mul", "--arg", "1.852"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    out = p.stdout
    def send(i):
        p.stdin.write(f'{{"datetime":"2026-01-01T00:00:{i // 1000 % 60:02d}.{i % 1000:03d}Z","value":{i}.5}}\n'.encode())
    send(0)
    out.readline()  # warm: the job is up
    samples = []
    next_at = time.perf_counter()
    for i in range(1, 301):
        next_at += 0.01
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t0 = time.perf_counter()
        send(i)
        out.readline()
        samples.append((time.perf_counter() - t0) * 1000)
    p.stdin.close()
    p.wait()
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99) - 1], samples[-1]


def peak_rss(rt):
    upper = rt.upper().replace("-", "_")
    argv = shlex.split(os.environ[f"MFAPI_{upper}_CMD"]) + ["mul", "1.852"]
    env = dict(os.environ)
    lib = os.environ.get(f"MFAPI_{upper}_LIBPATH")
    if lib:
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    # A fresh interpreter, so that RUSAGE_CHILDREN covers this job alone.
    code = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], stdin=open(%r), stdout=subprocess.DEVNULL, check=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" % values
    )
    kb = subprocess.run([sys.executable, "-c", code] + argv, env=env, check=True,
                        capture_output=True, text=True).stdout.strip()
    return int(kb) / 1024


print(f"{'runtime':8} {'start-up':>9} {'steady rec/s':>13} {'raw rec/s':>10} "
      f"{'lat p50':>8} {'p99':>7} {'max':>7} {'peak RSS':>9}   (N={N})")
for rt in sys.argv[1:]:
    var = f"MFAPI_{rt.upper().replace('-', '_')}_CMD"
    if not os.environ.get(var):
        print(f"{rt:8} skipped: {var} is not set (eval \"$(jobs/{rt}/setup.sh)\")")
        continue
    s = startup(rt)
    with open(ndjson) as inp:
        wall = run(rt, "mul", inp)
    steady = N / max(wall - s, 1e-9)
    p50, p99, worst = latency(rt)
    rss = peak_rss(rt)
    print(f"{rt:8} {s:8.2f}s {steady:13,.0f} {N / wall:10,.0f} "
          f"{p50:6.2f}ms {p99:5.2f}ms {worst:5.2f}ms {rss:7.1f}MB", flush=True)
EOF
