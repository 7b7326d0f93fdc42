#!/bin/bash
# usage: probe-serve.tmp.sh PORT [flags...]
port=$1; shift
cd /work/main
/work/main/node_modules/.bin/bun src/main.ts serve --model /tmp/pocket-full --port $port --host 127.0.0.1 --speaker-dir /tmp/bench22/sp$port "$@" > /tmp/bench22/server$port.log 2>&1 &
start=$(date +%s.%N)
for i in $(seq 1 300); do curl -sf http://127.0.0.1:$port/health/ready >/dev/null && break; sleep 0.05; done
ready=$(echo "$(date +%s.%N) - $start" | bc)
sleep 2
pid=$(pgrep -f "port $port --host" | while read p; do awk '/VmRSS/{print $2" '$p'"}' /proc/$p/status; done | sort -n | tail -1 | cut -d' ' -f2)
echo "ready ${ready}s  $(grep -E 'VmHWM|VmRSS' /proc/$pid/status | tr -s ' ' | tr '\n' ' ')"
pkill -f "port $port --host"; sleep 0.5
