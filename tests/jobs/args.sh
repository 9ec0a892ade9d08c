#!/bin/sh
# Writes each of its arguments on its own line to the file $ARGS_FILE, then echoes its input.
printf '%s\n' "$@" >"${ARGS_FILE:?set ARGS_FILE to the file to write}"
exec cat
