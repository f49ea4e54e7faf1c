//! The first and last event times of a MySQL/MariaDB binary log file, read from its event
//! headers, for `sexton binlog append`.
//!
//! A binlog is the 4-byte magic `FE 62 69 6E` followed by events, each starting with a 19-byte
//! little-endian header: `u32` timestamp (Unix seconds), `u8` type, `u32` server id, `u32`
//! event size (header included), `u32` next position, `u16` flags. Only the headers are read
//! (the reader seeks over each body), so a 1 GiB file costs a few thousand small reads.
//!
//! Times have one-second resolution, and retention deletes a segment whose `last_event` is
//! before the horizon, so the segment's end is rounded **up**: `last_event` is the end of the
//! second of its last event. A segment is then never thought to end before an event it holds.
//! The first event (the format description) carries the time the file was opened.
//!
//! A file the server still writes carries `LOG_EVENT_BINLOG_IN_USE_F` on its format
//! description event; it is refused unless the caller says it was left so by a crash, since an
//! open file's end is not its last event.

use std::io::{Read, Seek, SeekFrom};

use chrono::{DateTime, FixedOffset, TimeDelta};

pub const MAGIC: [u8; 4] = [0xfe, 0x62, 0x69, 0x6e];
pub const HEADER_BYTES: u64 = 19;
/// Event type 15: the format description event that starts every binlog (v4).
pub const FORMAT_DESCRIPTION_EVENT: u8 = 15;
/// Flag on the format description event while the server has the file open.
pub const BINLOG_IN_USE: u16 = 0x1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinlogFileError {
    #[error("not a binlog file: it does not start with FE 62 69 6E")]
    NotABinlog,
    #[error("binlog holds no event")]
    Empty,
    #[error("event at offset {offset}: {why}")]
    Corrupt { offset: u64, why: String },
    #[error("the server still writes this binlog (its format description event is flagged in use); only closed files are shipped (--allow-in-use for a file a crash left so)")]
    InUse,
    #[error("reading the binlog: {0}")]
    Io(String),
}

/// What the headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTimes {
    pub first_event: DateTime<FixedOffset>,
    /// The end of the second of the last event (see the module's notes).
    pub last_event: DateTime<FixedOffset>,
    pub events: u64,
    pub in_use: bool,
}

/// Reads every event header of `file` (of `length` bytes).
pub fn event_times(mut file: impl Read + Seek, length: u64) -> Result<EventTimes, BinlogFileError> {
    let io = |err: std::io::Error| BinlogFileError::Io(err.to_string());
    let mut magic = [0u8; 4];
    if length < 4 {
        return Err(BinlogFileError::NotABinlog);
    }
    file.read_exact(&mut magic).map_err(io)?;
    if magic != MAGIC {
        return Err(BinlogFileError::NotABinlog);
    }
    let mut offset = 4u64;
    let mut first: Option<u32> = None;
    let mut last: Option<u32> = None;
    let mut events = 0u64;
    let mut in_use = false;
    while offset < length {
        if length - offset < HEADER_BYTES {
            return Err(BinlogFileError::Corrupt {
                offset,
                why: format!("{} bytes left, less than an event header", length - offset),
            });
        }
        let mut header = [0u8; HEADER_BYTES as usize];
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        file.read_exact(&mut header).map_err(io)?;
        let timestamp = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
        let kind = header[4];
        let size = u64::from(u32::from_le_bytes(
            header[9..13].try_into().expect("4 bytes"),
        ));
        let flags = u16::from_le_bytes(header[17..19].try_into().expect("2 bytes"));
        if size < HEADER_BYTES || offset + size > length {
            return Err(BinlogFileError::Corrupt {
                offset,
                why: format!("event size {size} does not fit the file"),
            });
        }
        if events == 0 {
            if kind != FORMAT_DESCRIPTION_EVENT {
                return Err(BinlogFileError::Corrupt {
                    offset,
                    why: format!("the first event has type {kind}, not a format description"),
                });
            }
            in_use = flags & BINLOG_IN_USE != 0;
        }
        // A zero timestamp (some servers write one on an artificial event) says nothing.
        if timestamp != 0 {
            first = Some(first.map_or(timestamp, |f| f.min(timestamp)));
            last = Some(last.map_or(timestamp, |l| l.max(timestamp)));
        }
        events += 1;
        offset += size;
    }
    let (Some(first), Some(last)) = (first, last) else {
        return Err(BinlogFileError::Empty);
    };
    let at = |seconds: u32| {
        DateTime::from_timestamp(i64::from(seconds), 0)
            .expect("a u32 of seconds is a valid time")
            .fixed_offset()
    };
    Ok(EventTimes {
        first_event: at(first),
        last_event: at(last) + TimeDelta::seconds(1),
        events,
        in_use,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binlog of events `(timestamp, type, flags, body bytes)`.
    pub fn binlog(events: &[(u32, u8, u16, usize)]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for &(timestamp, kind, flags, body) in events {
            let size = HEADER_BYTES as u32 + body as u32;
            let next = out.len() as u32 + size;
            out.extend(timestamp.to_le_bytes());
            out.push(kind);
            out.extend(1u32.to_le_bytes());
            out.extend(size.to_le_bytes());
            out.extend(next.to_le_bytes());
            out.extend(flags.to_le_bytes());
            out.extend(std::iter::repeat_n(0xab, body));
        }
        out
    }

    fn times(bytes: &[u8]) -> Result<EventTimes, BinlogFileError> {
        event_times(std::io::Cursor::new(bytes), bytes.len() as u64)
    }

    #[test]
    fn first_and_last_event_times_with_the_end_rounded_up() {
        let file = binlog(&[
            (1_000, FORMAT_DESCRIPTION_EVENT, 0, 100),
            (0, 4, 0, 10),
            (1_005, 2, 8, 50),
            (1_009, 3, 0, 4),
        ]);
        let times = times(&file).unwrap();
        assert_eq!(times.first_event.timestamp(), 1_000);
        assert_eq!(times.last_event.timestamp(), 1_010);
        assert_eq!(times.events, 4);
        assert!(!times.in_use);
        let open = binlog(&[(1_000, FORMAT_DESCRIPTION_EVENT, BINLOG_IN_USE, 100)]);
        assert!(
            super::event_times(std::io::Cursor::new(&open), open.len() as u64)
                .unwrap()
                .in_use
        );
    }

    #[test]
    fn malformed_files_are_refused_with_the_offset() {
        let good = binlog(&[(1_000, FORMAT_DESCRIPTION_EVENT, 0, 100), (1_001, 2, 0, 10)]);
        assert_eq!(times(b"").unwrap_err(), BinlogFileError::NotABinlog);
        assert_eq!(
            times(b"PGDMP....").unwrap_err(),
            BinlogFileError::NotABinlog
        );
        assert_eq!(times(&MAGIC).unwrap_err(), BinlogFileError::Empty);
        let cut = &good[..good.len() - 3];
        assert!(times(cut).unwrap_err().to_string().contains("does not fit"));
        let mut tail = good.clone();
        tail.extend([1, 2, 3]);
        assert!(times(&tail)
            .unwrap_err()
            .to_string()
            .contains("less than an event header"));
        let not_fde = binlog(&[(1_000, 2, 0, 10)]);
        assert!(times(&not_fde)
            .unwrap_err()
            .to_string()
            .contains("format description"));
        let mut tiny = good.clone();
        tiny[4 + 9..4 + 13].copy_from_slice(&3u32.to_le_bytes());
        assert!(times(&tiny)
            .unwrap_err()
            .to_string()
            .contains("event size 3"));
        let zeros = binlog(&[(0, FORMAT_DESCRIPTION_EVENT, 0, 10)]);
        assert_eq!(times(&zeros).unwrap_err(), BinlogFileError::Empty);
    }
}
