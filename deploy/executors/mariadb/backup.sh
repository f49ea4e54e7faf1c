#!/bin/bash
# The backup command of `sexton exec` for MariaDB (see README.md here and docs/executors.md):
#
#   sexton exec --cluster db1 \
#     --backup-command 'MARIADB_SOCKET=/run/mysqld/mysqld.sock /opt/sexton/mariadb/backup.sh'
#
# A full backup, or an incremental from the parent's checkpoint LSN, streamed by
# `mariabackup --backup --stream=xbstream` into $SEXTON_OUTPUT_DIR/backup.xbstream; sexton exec
# uploads it (multipart, with its SHA-256) and writes metadata.json with the facts this script
# leaves in $SEXTON_FACTS_FILE: the LSNs (an incremental of this backup starts at its to_lsn)
# and the binlog position a point-in-time replay starts from.
#
# Environment (besides sexton exec's SEXTON_*):
#   MARIADB_SOCKET    the server's socket (required)
#   MARIADB_USER      the backup user (default root); MYSQL_PWD its password, if any
#   MARIABACKUP_ARGS  more arguments for mariabackup (e.g. --parallel=4)
set -euo pipefail

: "${MARIADB_SOCKET:?set MARIADB_SOCKET to the socket of the server}"
user="${MARIADB_USER:-root}"
lsndir="$SEXTON_SCRATCH_DIR/lsn"
mkdir -p "$lsndir"

# --no-defaults first, always: otherwise /etc/mysql's option files leak in.
args=(--no-defaults --backup --stream=xbstream "--user=$user" "--socket=$MARIADB_SOCKET"
      "--extra-lsndir=$lsndir" "--target-dir=$SEXTON_SCRATCH_DIR/target")
kind="$SEXTON_KIND"
if [ "$kind" = incremental ]; then
  if [ -n "${SEXTON_PARENT_FACT_TO_LSN:-}" ]; then
    args+=("--incremental-lsn=$SEXTON_PARENT_FACT_TO_LSN")
  else
    # A parent written by another tool (or by hand) has no checkpoint LSN to build on. A full
    # is always safe; sexton exec reports what was taken.
    echo "the parent's metadata.json has no to_lsn fact; taking a full backup instead" >&2
    kind=full
  fi
fi
# shellcheck disable=SC2206 # MARIABACKUP_ARGS is a list of words on purpose.
args+=(${MARIABACKUP_ARGS:-})

mariabackup "${args[@]}" > "$SEXTON_OUTPUT_DIR/backup.xbstream"

checkpoint() { sed -n "s/^$1 = //p" "$lsndir/xtrabackup_checkpoints"; }
# binlog_pos = filename 'mysql-bin.000004', position '1055', GTID of the last change '0-1-42'
position="$(sed -n 's/^binlog_pos = //p' "$lsndir/xtrabackup_info")"
field() { printf '%s' "$position" | sed -n "s/.*$1 '\\([^']*\\)'.*/\\1/p"; }
{
  echo "tool=mariabackup"
  echo "kind=$kind"
  echo "from_lsn=$(checkpoint from_lsn)"
  echo "to_lsn=$(checkpoint to_lsn)"
  echo "last_lsn=$(checkpoint last_lsn)"
  echo "binlog_file=$(field filename)"
  echo "binlog_position=$(field position)"
  echo "gtid=$(field 'GTID of the last change')"
  # The binlog segment a replay onto this backup starts in: all the archive needs to keep for
  # it when retention keeps it restorable to its own end only (standalone, pitr_full).
  echo "log_first=$(field filename)"
  echo "log_last=$(field filename)"
} > "$SEXTON_FACTS_FILE"
echo "mariabackup took the $kind backup: $(checkpoint from_lsn)..$(checkpoint to_lsn), binlog $(field filename):$(field position)"
