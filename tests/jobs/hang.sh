#!/bin/sh
# Reads all input but never answers, and after EOF goes on running: it never exits on its own.
cat >/dev/null
sleep 100000
