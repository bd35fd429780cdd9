#!/bin/bash
# Container health probe: healthcheck.sh PATH [PORT]. Exit 0 when GET PATH on 127.0.0.1 answers 200.
# Bash's own /dev/tcp and builtins: no node process (~0.3 s, ~80 MB) and no curl in the slim image.
set -u
path=${1:-/healthz}
port=${2:-${PORT:-3000}}
exec 3<>"/dev/tcp/127.0.0.1/${port}" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
IFS=' ' read -r -t 2 _ status _ <&3 || exit 1
[ "$status" = 200 ]
