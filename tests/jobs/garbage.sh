#!/bin/sh
# Echoes each input line, except the 3rd, which it answers with `not-a-number`.
n=0
while IFS= read -r line; do
    n=$((n + 1))
    if [ "$n" -eq 3 ]; then
        echo not-a-number
    else
        printf '%s\n' "$line"
    fi
done
