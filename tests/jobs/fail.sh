#!/bin/sh
# Reads one line, writes `boom: the job failed on purpose` to stderr and exits 3 without answering.
read -r line
echo 'boom: the job failed on purpose' >&2
exit 3
