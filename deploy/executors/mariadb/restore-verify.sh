#!/bin/bash
# Restores a MariaDB backup chain into a scratch datadir and proves it: mbstream -x,
# mariabackup --prepare (then each incremental, oldest first), mariadbd on a private socket and
# loopback port, optionally a point-in-time replay of shipped binlogs, a check query, stop.
#
#   restore-verify.sh --work DIR --port PORT [--check-query SQL]
#                     [--binlog-dir DIR --stop-datetime 'YYYY-MM-DD HH:MM:SS']  (UTC)
#                     FULL.xbstream [INCREMENTAL.xbstream ...]
#
# The check query's result is printed on stdout (one line per row, tab-separated). The server
# is stopped before the script ends, whatever happens. The files come from the bucket, checked
# and at their recorded versions: the chain's backup.xbstream objects (`sexton backup fetch ID
# --cluster C --to DIR`) and the binlog segments (`sexton binlog fetch --cluster C --until T
# --to DIR`); files before the backup's own binlog file are skipped.
set -euo pipefail

work="" port="" check="SELECT 1" binlogs="" stop=""
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --check-query) check="$2"; shift 2 ;;
    --binlog-dir) binlogs="$2"; shift 2 ;;
    --stop-datetime) stop="$2"; shift 2 ;;
    --) shift; break ;;
    -*) echo "restore-verify.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ -z "$work" ] || [ -z "$port" ] || [ $# -lt 1 ]; then
  echo "usage: restore-verify.sh --work DIR --port PORT [--check-query SQL] [--binlog-dir DIR --stop-datetime T] FULL.xbstream [INCREMENTAL.xbstream ...]" >&2
  exit 2
fi
if [ -n "$binlogs" ] && [ -z "$stop" ]; then
  echo "restore-verify.sh: --binlog-dir needs --stop-datetime" >&2
  exit 2
fi

log() { echo "restore-verify: $*" >&2; }
datadir="$work/datadir"
rm -rf "$datadir" "$work"/incremental-*
mkdir -p "$datadir"
log "extracting $1"
mbstream -x -C "$datadir" < "$1"
mariabackup --no-defaults --prepare "--target-dir=$datadir" >"$work/prepare.log" 2>&1 \
  || { cat "$work/prepare.log" >&2; exit 1; }
shift
n=0
for incremental in "$@"; do
  n=$((n + 1))
  log "applying incremental $incremental"
  mkdir -p "$work/incremental-$n"
  mbstream -x -C "$work/incremental-$n" < "$incremental"
  mariabackup --no-defaults --prepare "--target-dir=$datadir" "--incremental-dir=$work/incremental-$n" \
    >"$work/prepare-$n.log" 2>&1 || { cat "$work/prepare-$n.log" >&2; exit 1; }
done

socket="$work/mysqld.sock"
server=(mariadbd --no-defaults "--datadir=$datadir" "--socket=$socket" "--port=$port"
        --bind-address=127.0.0.1 "--pid-file=$work/mysqld.pid" "--log-error=$work/mysqld.err"
        --innodb-buffer-pool-size=32M --default-time-zone=+00:00 --skip-log-bin)
[ "$(id -u)" != 0 ] || server+=(--user=root)
"${server[@]}" &
pid=$!
stop_server() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap stop_server EXIT
sql=(mariadb --no-defaults "--socket=$socket" --user=root)
for _ in $(seq 1 300); do
  if mariadb-admin --no-defaults "--socket=$socket" --user=root ping >/dev/null 2>&1; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/mysqld.err" >&2; exit 1; }
  sleep 0.1
done
mariadb-admin --no-defaults "--socket=$socket" --user=root ping >/dev/null

if [ -n "$binlogs" ]; then
  # Where the restored data ends in the binlog: the last backup applied says.
  read -r file position _ < "$datadir/xtrabackup_binlog_info"
  [ -e "$binlogs/$file" ] || { log "$file (the backup's binlog position) is not in $binlogs"; exit 1; }
  replay=()
  # Binlog files only (<base>.<number>, not an .index file), from the backup's file on.
  for segment in "$binlogs"/*; do
    name="$(basename "$segment")"
    [[ "$name" =~ \.[0-9]+$ ]] || continue
    [[ "$name" < "$file" ]] || replay+=("$segment")
  done
  log "replaying ${#replay[@]} binlog file(s) from $file:$position to $stop (UTC)"
  # --start-position applies to the first file; --stop-datetime excludes events at or after it.
  TZ=UTC mariadb-binlog --no-defaults "--start-position=$position" "--stop-datetime=$stop" "${replay[@]}" \
    | "${sql[@]}"
fi
"${sql[@]}" -N -B -e "$check"
