#!/bin/bash
# Ships a MariaDB server's closed binlog files into the cluster's binlog archive with
# `sexton binlog append` (upload first, then a conditional append to _index.json; files already
# in the archive are skipped). Run it from cron or a systemd timer, as often as the point-in-time
# recovery objective asks (a binlog is shipped once closed: --flush closes the current one).
#
#   ship-binlogs.sh --cluster db1 [--flush]
#
# Environment: MARIADB_SOCKET (required), MARIADB_USER (default root), MYSQL_PWD; SEXTON_BIN
# (default `sexton`) and its configuration (SEXTON_CONFIG or SEXTON_S3_*).
set -euo pipefail

cluster=""
flush=false
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) cluster="${2:?--cluster needs a value}"; shift 2 ;;
    --flush) flush=true; shift ;;
    *) echo "usage: ship-binlogs.sh --cluster NAME [--flush]" >&2; exit 2 ;;
  esac
done
[ -n "$cluster" ] || { echo "usage: ship-binlogs.sh --cluster NAME [--flush]" >&2; exit 2; }
: "${MARIADB_SOCKET:?set MARIADB_SOCKET to the socket of the server}"

sql=(mariadb --no-defaults "--socket=$MARIADB_SOCKET" "--user=${MARIADB_USER:-root}" -N -B)
if $flush; then
  "${sql[@]}" -e 'FLUSH BINARY LOGS'
fi
basename="$("${sql[@]}" -e 'SELECT @@log_bin_basename')"
[ "$basename" != NULL ] || { echo "the server does not write binlogs (--log-bin)" >&2; exit 1; }
directory="$(dirname "$basename")"
# Closed files: every binlog but the one the server writes now.
current="$("${sql[@]}" -e 'SHOW MASTER STATUS' | cut -f1)"
files=()
while read -r name _; do
  [ "$name" = "$current" ] || files+=("$directory/$name")
done < <("${sql[@]}" -e 'SHOW BINARY LOGS')
[ ${#files[@]} -gt 0 ] || exit 0
exec "${SEXTON_BIN:-sexton}" binlog append --cluster "$cluster" "${files[@]}"
