#!/bin/bash
# The restore test of `sexton exec --verify-command` for MariaDB: restores the chain sexton
# exec downloaded (and checked against its recorded checksums) into $SEXTON_INPUT_DIR with
# restore-verify.sh, on a scratch datadir and a loopback port, runs a check query, stops the
# server. Exit 0 proves the backup restorable; anything else fails the test, and the end of
# stderr becomes the verdict's reason.
#
#   sexton exec --verify-command /opt/sexton/mariadb/verify.sh ...
#
# A drill (`sexton recovery drill`) also sets SEXTON_RECOVER_UNTIL and SEXTON_LOG_DIR: the
# binlogs are replayed up to that instant before the check query.
#
# Environment (besides sexton exec's): MARIADB_VERIFY_PORT (default 3399; one test at a time
# per port) and MARIADB_VERIFY_QUERY (default "SELECT 1"; a query that must return a row).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "${SEXTON_JOB:-}" = verify ] || { echo "verify.sh: not a verify job" >&2; exit 2; }
files=()
for dir in "$SEXTON_INPUT_DIR"/*/; do
  [ -s "$dir/backup.xbstream" ] || { echo "verify.sh: $dir has no backup.xbstream" >&2; exit 1; }
  files+=("$dir/backup.xbstream")
done
[ ${#files[@]} -gt 0 ] || { echo "verify.sh: the chain is empty" >&2; exit 1; }
# A drill to a point in time (`sexton recovery drill`): the segments that reach the instant are
# in $SEXTON_LOG_DIR; replay them from the restored backup's binlog position up to the second
# of $SEXTON_RECOVER_UNTIL (events at or after it are not applied).
replay=()
if [ -n "${SEXTON_RECOVER_UNTIL:-}" ]; then
  stop="$(date -u -d "$SEXTON_RECOVER_UNTIL" '+%Y-%m-%d %H:%M:%S')" \
    || { echo "verify.sh: SEXTON_RECOVER_UNTIL=$SEXTON_RECOVER_UNTIL is not a time" >&2; exit 1; }
  replay=(--binlog-dir "$SEXTON_LOG_DIR" --stop-datetime "$stop")
fi
out="$("$here/restore-verify.sh" --work "$SEXTON_SCRATCH_DIR" \
  --port "${MARIADB_VERIFY_PORT:-3399}" --check-query "${MARIADB_VERIFY_QUERY:-SELECT 1}" \
  "${replay[@]}" "${files[@]}")"
[ -n "$out" ] || { echo "verify.sh: the check query returned nothing" >&2; exit 1; }
echo "restored ${#files[@]} backup(s) of $SEXTON_BACKUP_ID${stop:+, replayed to $stop UTC}; the check query returned $(printf '%s\n' "$out" | wc -l) row(s)"
