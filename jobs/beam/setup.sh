#!/usr/bin/env bash
# Installs Apache Beam (Python SDK, from PyPI) into a venv under
# ${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/beam and writes the
# launcher `run-job` there. Idempotent: a second run with nothing to do takes
# about a second. Everything goes to stderr except the last lines, `export`
# lines for a shell:
#
#     eval "$(jobs/beam/setup.sh)"
set -euo pipefail

BEAM_VERSION=2.77.0
here="$(cd "$(dirname "$0")" && pwd)"
home="${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/beam"
venv="$home/venv"
stamp="$venv/.mfstream-apache-beam-$BEAM_VERSION"

exec 3>&1 1>&2 # stdout is for the export lines only

if [ ! -e "$stamp" ]; then
    echo "beam: installing apache-beam==$BEAM_VERSION into $venv (about 30 s)"
    mkdir -p "$home"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "apache-beam==$BEAM_VERSION"
    touch "$stamp"
fi

# The launcher: the venv's Python on the job in this checkout. `exec`, so the
# job is the process the host signals (one process, its own group).
launcher="$home/run-job"
want="#!/bin/sh
exec \"$venv/bin/python\" \"$here/beam_job.py\" \"\$@\"
"
if [ ! -x "$launcher" ] || [ "$(cat "$launcher")" != "${want%$'\n'}" ]; then
    printf '%s' "$want" > "$launcher.tmp" && chmod +x "$launcher.tmp" && mv "$launcher.tmp" "$launcher"
    echo "beam: wrote $launcher"
fi

q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
echo "export MFAPI_BEAM_CMD=$(q "$launcher")" >&3
