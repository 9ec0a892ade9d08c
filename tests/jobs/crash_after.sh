#!/bin/sh
# On its first run (no file $CRASH_MARKER yet: it creates it) echoes $CRASH_AFTER lines (default 3), then exits 1 without answering the rest; on later runs it is a plain echo. With CRASH_MARKER unset it crashes every time.
if [ -n "${CRASH_MARKER:-}" ]; then
    if [ -e "$CRASH_MARKER" ]; then
        exec cat
    fi
    : >"$CRASH_MARKER"
fi
i=0
while [ "$i" -lt "${CRASH_AFTER:-3}" ] && IFS= read -r line; do
    printf '%s\n' "$line"
    i=$((i + 1))
done
exit 1
