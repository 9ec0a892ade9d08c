#!/bin/sh
# A protocol-2 value job: answers "!negative" for a negative input and echoes
# the rest; at the end of its input it touches $MARKER, then exits 0.
while IFS= read -r line; do
    case "$line" in
        -*) echo "!negative" ;;
        *) echo "$line" ;;
    esac
done
touch "$MARKER"
