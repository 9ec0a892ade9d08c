#!/bin/sh
# Writes `LD_LIBRARY_PATH=…`, `MFSTREAM_QUERY=…`, `MFSTREAM_FRAMING=…` (`<unset>` when unset) and `ARGS=<its arguments>` to the file $ENV_DUMP_FILE, one per line, then echoes its input.
{
    printf 'LD_LIBRARY_PATH=%s\n' "${LD_LIBRARY_PATH-<unset>}"
    printf 'MFSTREAM_QUERY=%s\n' "${MFSTREAM_QUERY-<unset>}"
    printf 'MFSTREAM_FRAMING=%s\n' "${MFSTREAM_FRAMING-<unset>}"
    printf 'ARGS=%s\n' "$*"
} >"${ENV_DUMP_FILE:?set ENV_DUMP_FILE to the file to write}"
exec cat
