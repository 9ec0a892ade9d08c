#!/bin/sh
# Echoes each input line, writing 64 KiB to stderr before each answer (a host that does not drain stderr deadlocks), then `flood done` on stderr at EOF.
chunk=x
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
    chunk="$chunk$chunk"
done
while IFS= read -r line; do
    printf '%s\n' "$chunk" >&2
    printf '%s\n' "$line"
done
echo 'flood done' >&2
