#!/bin/sh
# Starts a background `sleep 100000` (its pid written to $CHILD_PID_FILE if set), echoes each input line, then waits for that child after EOF: it never exits on its own, and killing only this shell leaves the child alive.
# The child does not hold our stdout or stderr, so a host that kills only the shell sees the pipes close and a test can then check the pid.
sleep 100000 >/dev/null 2>&1 &
child=$!
if [ -n "${CHILD_PID_FILE:-}" ]; then
    echo "$child" >"$CHILD_PID_FILE"
fi
while IFS= read -r line; do
    printf '%s\n' "$line"
done
wait "$child"
