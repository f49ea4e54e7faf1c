#!/bin/bash
# The restore test of `sexton exec --verify-command` for MariaDB: restores the chain sexton
# exec downloaded (and checked against its recorded checksums) into $SEXTON_INPUT_DIR with
# restore-verify.sh, on a scratch datadir and a loopback port, runs a check query, stops the
# server. Exit 0 proves the backup restorable; anything else fails the test, and the end of
# stderr becomes the verdict's reason.
#
#   sexton exec --verify-command /opt/sexton/mariadb/verify.sh ...
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
out="$("$here/restore-verify.sh" --work "$SEXTON_SCRATCH_DIR" \
  --port "${MARIADB_VERIFY_PORT:-3399}" --check-query "${MARIADB_VERIFY_QUERY:-SELECT 1}" \
  "${files[@]}")"
[ -n "$out" ] || { echo "verify.sh: the check query returned nothing" >&2; exit 1; }
echo "restored ${#files[@]} backup(s) of $SEXTON_BACKUP_ID; the check query returned $(printf '%s\n' "$out" | wc -l) row(s)"
