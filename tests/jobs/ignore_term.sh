#!/bin/sh
# Ignores SIGTERM (so do its children), echoes each input line, then keeps running after EOF: only SIGKILL ends it.
trap '' TERM
while IFS= read -r line; do
    printf '%s\n' "$line"
done
while :; do
    sleep 1
done
