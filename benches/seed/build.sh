#!/usr/bin/env bash
# Builds the Go original's bridge engine, with the benchmark driver main.go,
# into target/seedbench/seedbench.
#
# The seed (stream_engine_bridge.go) is not vendored: it is copied, unmodified,
# from ../shared/seed/ next to the repository (override with SEED_GO=FILE) into
# a temporary module together with main.go and go.mod, and built there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seed="${SEED_GO:-$root/../shared/seed/stream_engine_bridge.go}"
out="$root/target/seedbench/seedbench"

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: 'go' not found; install Go >= 1.19 (Debian: apt-get install -y golang-go)" >&2
    exit 1
fi
if [[ ! -f "$seed" ]]; then
    echo "build.sh: seed not found at $seed (set SEED_GO to the path of stream_engine_bridge.go)" >&2
    exit 1
fi

mkdir -p "$root/target/seedbench"
work="$(mktemp -d "$root/target/seedbench/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$here/main.go" "$here/go.mod" "$work/"
# The shared seed file starts with a bare line naming the file
# ("stream_engine_bridge.go"), left over from how it was pasted; it is not Go
# and the compiler stops on it. Only that one line is dropped, and only if it
# is exactly such a name; every other byte of the seed is compiled as is.
if head -n 1 "$seed" | grep -Eqx '[A-Za-z0-9_]+\.go'; then
    echo "build.sh: dropping the seed's first line ('$(head -n 1 "$seed")'): a file-name header, not Go" >&2
    tail -n +2 "$seed" > "$work/stream_engine_bridge.go"
else
    cp "$seed" "$work/stream_engine_bridge.go"
fi

# No dependencies outside the standard library; never reach the network.
(cd "$work" && GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 go build -trimpath -o "$out" .)
echo "built $out (seed: $seed)" >&2
