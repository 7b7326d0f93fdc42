#!/usr/bin/env bash
# A one-host Ceph RGW (S3 server) on loopback, for tests: 1 mon, 1 memstore OSD (data in memory), 1 radosgw;
# no cephx, no mgr, every listener on 127.0.0.1. Mocks such as s3rver ignore conditional writes, so the S3
# storage is tested against the real thing.
#
# Usage: scripts/rgw-up.sh [--while-stdin-open] DIR PORT [MON_PORT]
#   DIR        a new or empty folder: ceph.conf, data, logs (DIR/log) and DIR/{mon,osd,rgw}.pid
#   PORT       the S3 endpoint, http://127.0.0.1:PORT
#   MON_PORT   the monitor's port (default 3300); give each concurrent cluster its own
#   --while-stdin-open
#              stay in the foreground once up, until stdin closes (or a SIGINT/SIGTERM/SIGHUP), then stop the
#              daemons and remove DIR. A caller that spawns the script with a stdin pipe gets daemons that end
#              with it, even when it is killed outright: the kernel closes the pipe.
# Prints "rgw up: http://127.0.0.1:PORT …" once the S3 user works (access key VOXEDGETESTKEY, secret
# voxedgetestsecret); without --while-stdin-open it then exits, leaving the daemons running, and
#   kill $(cat DIR/rgw.pid DIR/osd.pid DIR/mon.pid)
# stops them. On failure it says which step failed, shows the daemons' log tails, stops what it started and
# exits 1.
# Needs: apt-get install --no-install-recommends ceph-mon ceph-osd radosgw (or bash scripts/install-system-deps.sh)
set -euo pipefail

usage() {
  echo "usage: $0 [--while-stdin-open] DIR PORT [MON_PORT]" >&2
  exit 2
}
while_stdin_open=false
if [ "${1:-}" = "--while-stdin-open" ]; then
  while_stdin_open=true
  shift
fi
[ $# -ge 2 ] && [ $# -le 3 ] || usage
D=$1
PORT=$2
MON_PORT=${3:-3300}
for value in "$PORT" "$MON_PORT"; do
  [[ "$value" =~ ^[0-9]+$ ]] || usage
done
# The caller's stdin is kept aside for --while-stdin-open; nothing else may read it or hold it open.
exec 9<&0 0</dev/null
ACCESS_KEY=VOXEDGETESTKEY
SECRET_KEY=voxedgetestsecret

fail() {
  echo "rgw-up: FAILED: $*" >&2
  exit 1
}

missing=()
for binary in ceph-mon ceph-osd radosgw monmaptool ceph radosgw-admin; do
  command -v "$binary" >/dev/null 2>&1 || missing+=("$binary")
done
[ ${#missing[@]} -eq 0 ] || fail "not installed: ${missing[*]}; run: apt-get install --no-install-recommends ceph-mon ceph-osd radosgw (or: bash scripts/install-system-deps.sh)"

# Never delete a folder the caller may care about: it must be new or empty.
if [ -e "$D" ] && [ -n "$(ls -A "$D")" ]; then fail "$D is not empty"; fi
mkdir -p "$D"
D=$(cd "$D" && pwd)
mkdir -p "$D"/{mon,osd,rgw,run,log,crash}

stop_daemons() {
  local name
  for name in rgw osd mon; do
    [ -f "$D/$name.pid" ] && kill -9 "$(cat "$D/$name.pid")" 2>/dev/null || true
  done
}

started=false
on_exit() {
  local status=$?
  # Clean-up is best effort: one failed kill must not cut it short.
  set +e
  if [ "$started" = true ]; then
    if [ "$while_stdin_open" = true ]; then
      # Not bash's "Killed" notice for every daemon: stopping them is the plan.
      exec 2>/dev/null
      stop_daemons
      [ -n "${stdin_reader:-}" ] && kill "$stdin_reader" 2>/dev/null
      # They are our children here: reaping them leaves no zombies, and nothing writes into DIR any more.
      wait
      rm -rf "$D"
    fi
    return
  fi
  echo "rgw-up: FAILED (exit $status) while: ${step:-?}" >&2
  for log in "$D"/log/*; do
    [ -s "$log" ] || continue
    echo "--- tail of $log" >&2
    tail -n 25 "$log" >&2
  done
  stop_daemons
  wait
  exit 1
}
trap on_exit EXIT
# A signal during bring-up or while waiting ends the script through the EXIT trap above.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# A daemon that died says so at once instead of as a timeout later.
require_alive() {
  local name
  for name in "$@"; do
    kill -0 "$(cat "$D/$name.pid")" 2>/dev/null || fail "$name exited; see $D/log/$name.out and $D/log/*.log"
  done
}

# 200 from the S3 port (an anonymous ListBuckets), through bash's /dev/tcp so curl is not needed.
rgw_answers() {
  local status
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 1
  printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  IFS= read -r -t 5 status <&3 || status=""
  exec 3<&- 3>&-
  [[ "$status" == "HTTP/1.1 200"* ]]
}

step="writing ceph.conf"
FSID=$(cat /proc/sys/kernel/random/uuid)
cat >"$D/ceph.conf" <<EOF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
# radosgw, as a daemon, would otherwise demand "secure" mode, which cannot work without cephx.
ms mon client mode = crc secure
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
# radosgw creates 6 pools on its first start.
mon max pg per osd = 1000
# A nearly full /tmp must not stop the monitor mid-test; the data is in memory anyway.
mon data avail crit = 0
mon data avail warn = 0
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 536870912
run dir = $D/run
crash dir = $D/crash
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
mon data = $D/mon/\$cluster-\$id
osd data = $D/osd/\$cluster-\$id
keyring = $D/keyring
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$PORT
rgw data = $D/rgw
EOF
C=(-c "$D/ceph.conf")

step="creating the monitor (port $MON_PORT)"
monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$D/monmap" >"$D/log/monmaptool.out" 2>&1
ceph-mon "${C[@]}" --mkfs -i a --monmap "$D/monmap" >"$D/log/mon-mkfs.out" 2>&1
step="starting the monitor (port $MON_PORT)"
ceph-mon "${C[@]}" -i a -f </dev/null 9<&- >"$D/log/mon.out" 2>&1 &
echo $! >"$D/mon.pid"

step="registering the OSD (ceph osd new; is port $MON_PORT free?)"
OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
if ! OSD_ID=$(timeout 30 ceph "${C[@]}" --connect-timeout 25 osd new "$OSD_UUID" 2>"$D/log/osd-new.out"); then
  require_alive mon
  fail "the monitor did not register the OSD within 30 s"
fi
step="creating the OSD"
mkdir -p "$D/osd/ceph-$OSD_ID"
ceph-osd "${C[@]}" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >"$D/log/osd-mkfs.out" 2>&1
step="creating radosgw's pools"
# Created before the OSD starts, so their placement groups come up together with it instead of one pool at a
# time on radosgw's first start and first bucket (seconds each).
pool_creates=()
for pool in .rgw.root default.rgw.control default.rgw.meta default.rgw.log default.rgw.buckets.index default.rgw.buckets.data default.rgw.buckets.non-ec; do
  timeout 30 ceph "${C[@]}" --connect-timeout 25 osd pool create "$pool" 8 >>"$D/log/pool-create.out" 2>&1 &
  pool_creates+=($!)
done
for pid in "${pool_creates[@]}"; do wait "$pid"; done
step="starting the OSD"
ceph-osd "${C[@]}" -i "$OSD_ID" -f </dev/null 9<&- >"$D/log/osd.out" 2>&1 &
echo $! >"$D/osd.pid"

step="starting radosgw (port $PORT)"
radosgw "${C[@]}" -n client.rgw.a -f </dev/null 9<&- >"$D/log/rgw.out" 2>&1 &
echo $! >"$D/rgw.pid"
step="waiting for radosgw to answer on 127.0.0.1:$PORT"
deadline=$((SECONDS + 90))
until rgw_answers; do
  require_alive mon osd rgw
  [ $SECONDS -lt $deadline ] || fail "radosgw did not answer on 127.0.0.1:$PORT within 90 s"
  sleep 0.25
done

step="creating the S3 user"
timeout 60 radosgw-admin "${C[@]}" user create --uid=voxedge --display-name=voxedge \
  --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >"$D/log/user-create.out" 2>&1

started=true
echo "rgw up: http://127.0.0.1:$PORT (mon 127.0.0.1:$MON_PORT) in $D"
if [ "$while_stdin_open" = true ]; then
  # In the background so that a signal interrupts `wait` at once instead of waiting for cat to return.
  cat <&9 >/dev/null &
  stdin_reader=$!
  wait "$stdin_reader" || true
fi
