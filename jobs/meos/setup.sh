#!/usr/bin/env bash
# Installs MEOS (the libmeos that PyPI's pymeos-cffi ships) into a venv under
# ${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/meos and builds the C
# job `meos-job` there with gcc. Idempotent: a second run with nothing to do
# takes well under a second. Everything goes to stderr except the last lines,
# `export` lines for a shell:
#
#     eval "$(jobs/meos/setup.sh)"
set -euo pipefail

PYMEOS_CFFI_VERSION=1.3.0
# The geometric oracles (tests/oracle/geo_oracle.py and edge_oracle.py,
# crates/model/src/geo/oracle/): pymeos over the same libmeos, shapely for fences,
# GeographicLib, and mpmath for distances in extended precision.
PYMEOS_VERSION=1.3.0
SHAPELY_VERSION=2.2.0
GEOGRAPHICLIB_VERSION=2.1
MPMATH_VERSION=1.4.1
here="$(cd "$(dirname "$0")" && pwd)"
home="${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/meos"
venv="$home/venv"
stamp="$venv/.mfstream-pymeos-cffi-$PYMEOS_CFFI_VERSION"
oracle_stamp="$venv/.mfstream-pymeos-$PYMEOS_VERSION-shapely-$SHAPELY_VERSION-geographiclib-$GEOGRAPHICLIB_VERSION-mpmath-$MPMATH_VERSION"

exec 3>&1 1>&2 # stdout is for the export lines only

if [ ! -e "$stamp" ]; then
    echo "meos: installing pymeos-cffi==$PYMEOS_CFFI_VERSION into $venv (about 10 s)"
    mkdir -p "$home"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "pymeos-cffi==$PYMEOS_CFFI_VERSION"
    touch "$stamp"
fi
if [ ! -e "$oracle_stamp" ]; then
    echo "meos: installing pymeos==$PYMEOS_VERSION, shapely, geographiclib, mpmath into $venv (about 10 s)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "pymeos==$PYMEOS_VERSION" \
        "pymeos-cffi==$PYMEOS_CFFI_VERSION" \
        "shapely==$SHAPELY_VERSION" "geographiclib==$GEOGRAPHICLIB_VERSION" \
        "mpmath==$MPMATH_VERSION"
    touch "$oracle_stamp"
fi

libs="$(echo "$venv"/lib/python3*/site-packages/pymeos_cffi.libs)"
meos="$(cd "$libs" && ls libmeos-*.so 2>/dev/null | head -n 1)"
if [ -z "$meos" ]; then
    echo "meos: no libmeos-*.so in $libs" && exit 1
fi

# Rebuild when the source, the compiler flags or the library changes.
job="$home/meos-job"
flags=(-O2 -Wall -Wextra -std=c11 "-DMEOS_SONAME=\"$meos\"")
key="$(cat "$here/meos_job.c" <(printf '%s\n' "${flags[@]}") | sha256sum | cut -c1-16)"
if [ ! -x "$job" ] || [ "$(cat "$job.key" 2>/dev/null)" != "$key" ]; then
    command -v gcc >/dev/null || { echo "meos: gcc is needed to build the job"; exit 1; }
    gcc "${flags[@]}" -o "$job.tmp" "$here/meos_job.c" -ldl -lm
    mv "$job.tmp" "$job"
    echo "$key" > "$job.key"
    echo "meos: built $job (MEOS is $libs/$meos)"
fi

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
echo "export MFAPI_MEOS_CMD=$(q "$job")" >&3
echo "export MFAPI_MEOS_LIBPATH=$(q "$libs")" >&3
# The meos plugin (plugins/meos) loads the same libmeos, from this variable.
echo "export MFSTREAM_MEOS_LIB=$(q "$libs")" >&3
# The geometric oracles' Python (pymeos, shapely, geographiclib, mpmath).
echo "export MFSTREAM_PYMEOS_PYTHON=$(q "$venv/bin/python")" >&3
