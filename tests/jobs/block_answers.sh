#!/bin/sh
# Reads all input until EOF before answering anything, then echoes every line: a job that buffers its output.
input=$(cat)
if [ -n "$input" ]; then
    printf '%s\n' "$input"
fi
