//! What a backup command left in its output directory, and whether all of it may be uploaded.
//!
//! Every regular file under the output directory becomes the object `<object
//! prefix><relative path>`, so a file name is an object key inside the backup's own directory.
//! A name that could leave that directory or confuse a reader of the bucket (`..`, an empty
//! or `.` segment, a backslash, a control character, `metadata.json` at the top, which Sexton
//! writes itself) fails the backup, as does anything that is not a regular file: a symbolic
//! link (wherever it points), a device, a socket, a FIFO. Nothing is uploaded unless every
//! entry passes, so a bad name never leaves half a backup in the bucket.
//!
//! [`check_name`] is pure; [`scan`] walks the directory without following links and returns
//! every file with the identity (device, inode, size) it had, which the uploader checks again
//! on the file it opens.

use std::path::{Path, PathBuf};

/// The deepest directory nesting scanned.
pub const MAX_DEPTH: usize = 32;
/// The longest path segment (a Linux file name is at most 255 bytes too).
pub const MAX_SEGMENT_BYTES: usize = 255;
/// The longest relative name; with the backup's prefix a key stays under S3's 1024 bytes.
pub const MAX_NAME_BYTES: usize = 768;

/// One file to upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    /// The path relative to the output directory, `/`-separated: the key's suffix.
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    /// Device and inode seen by the scan, checked again on the opened file.
    pub device: u64,
    pub inode: u64,
}

/// What may be taken from the output directory at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_files: usize,
    pub max_bytes: u64,
}

/// Checks one relative name (segments joined by `/`); the error says why it is refused.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an empty name".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!("a name longer than {MAX_NAME_BYTES} bytes"));
    }
    if name == sexton_model::metadata::FILE_NAME {
        return Err(format!(
            "{} is written by Sexton itself",
            sexton_model::metadata::FILE_NAME
        ));
    }
    for segment in name.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err("an empty, '.' or '..' path segment".into());
        }
        if segment.len() > MAX_SEGMENT_BYTES {
            return Err(format!("a segment longer than {MAX_SEGMENT_BYTES} bytes"));
        }
        if segment.chars().any(|c| c.is_control() || c == '\\') {
            return Err("a control character or a backslash".into());
        }
    }
    Ok(())
}

/// The files under `dir`, sorted by name, or every reason the output cannot be uploaded.
/// Empty directories are ignored; an output without any file is refused.
pub fn scan(dir: &Path, limits: Limits) -> Result<Vec<OutputFile>, Vec<String>> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    walk(dir, "", 0, limits, &mut files, &mut problems);
    if problems.is_empty() {
        if files.is_empty() {
            problems.push("the command left no file in its output directory".into());
        } else {
            let total: u64 = files.iter().map(|f| f.size).sum();
            if total > limits.max_bytes {
                problems.push(format!(
                    "the output holds {total} bytes, more than the {} allowed (--max-output-bytes)",
                    limits.max_bytes
                ));
            }
        }
    }
    if problems.is_empty() {
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    } else {
        Err(problems)
    }
}

fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    limits: Limits,
    files: &mut Vec<OutputFile>,
    problems: &mut Vec<String>,
) {
    use std::os::unix::fs::MetadataExt as _;
    const SHOWN: usize = 20;
    let complain = |problems: &mut Vec<String>, text: String| {
        if problems.len() < SHOWN {
            problems.push(text);
        }
    };
    if depth > MAX_DEPTH {
        complain(
            problems,
            format!("{prefix}: nested deeper than {MAX_DEPTH} directories"),
        );
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            complain(problems, format!("cannot list {}: {err}", dir.display()));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                complain(problems, format!("cannot list {}: {err}", dir.display()));
                continue;
            }
        };
        let raw = entry.file_name();
        let Some(segment) = raw.to_str() else {
            complain(
                problems,
                format!("{prefix}{}: not valid UTF-8", raw.to_string_lossy()),
            );
            continue;
        };
        let name = format!("{prefix}{segment}");
        // Never follows a link: the entry itself is judged.
        let metadata = match std::fs::symlink_metadata(entry.path()) {
            Ok(metadata) => metadata,
            Err(err) => {
                complain(problems, format!("{name}: {err}"));
                continue;
            }
        };
        let kind = metadata.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            complain(
                problems,
                format!(
                    "{name} is a symbolic link (to {target:?}); only regular files are uploaded"
                ),
            );
            continue;
        }
        if let Err(why) = check_name(&name) {
            complain(problems, format!("{name:?}: {why}"));
            continue;
        }
        if kind.is_dir() {
            walk(
                &entry.path(),
                &format!("{name}/"),
                depth + 1,
                limits,
                files,
                problems,
            );
        } else if kind.is_file() {
            if files.len() >= limits.max_files {
                complain(
                    problems,
                    format!(
                        "more than {} files in the output (--max-output-files)",
                        limits.max_files
                    ),
                );
                return;
            }
            files.push(OutputFile {
                name,
                path: entry.path(),
                size: metadata.len(),
                device: metadata.dev(),
                inode: metadata.ino(),
            });
        } else {
            complain(
                problems,
                format!("{name} is not a regular file (a device, socket or FIFO)"),
            );
        }
    }
}

/// Opens a scanned file and checks it is still the file the scan saw (same device, inode and
/// size), so nothing swapped in after the scan (a link, another file) is uploaded.
pub fn open(file: &OutputFile) -> Result<std::fs::File, String> {
    use std::os::unix::fs::MetadataExt as _;
    let opened = std::fs::File::open(&file.path).map_err(|err| format!("{}: {err}", file.name))?;
    let metadata = opened
        .metadata()
        .map_err(|err| format!("{}: {err}", file.name))?;
    if metadata.dev() != file.device || metadata.ino() != file.inode || !metadata.is_file() {
        return Err(format!(
            "{} was replaced after the command ended",
            file.name
        ));
    }
    if metadata.len() != file.size {
        return Err(format!(
            "{} changed size after the command ended ({} bytes, then {})",
            file.name,
            file.size,
            metadata.len()
        ));
    }
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_files: 100,
        max_bytes: 1 << 20,
    };

    #[test]
    fn names_that_stay_in_the_backups_directory() {
        for good in [
            "backup.xbstream",
            "base/base.tar.gz",
            "pv1/disk.img",
            "a b",
            "ünïcode",
            ".hidden",
            "..x",
        ] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("", "empty name"),
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("./x", "'.'"),
            ("a//b", "empty"),
            ("a\\b", "backslash"),
            ("a\nb", "control"),
            ("metadata.json", "written by Sexton"),
        ] {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        assert!(check_name(&"x".repeat(256))
            .unwrap_err()
            .contains("segment"));
        assert!(check_name(&"x/".repeat(400))
            .unwrap_err()
            .contains("longer"));
        // metadata.json is reserved only at the top: a volume may hold its own.
        assert_eq!(check_name("pv1/metadata.json"), Ok(()));
    }

    #[test]
    fn a_scan_lists_regular_files_sorted_and_refuses_everything_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pv1/deep")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::write(root.join("b.bin"), b"bb").unwrap();
        std::fs::write(root.join("pv1/deep/a.img"), b"a").unwrap();
        let files = scan(root, LIMITS).unwrap();
        let names: Vec<_> = files.iter().map(|f| (f.name.as_str(), f.size)).collect();
        assert_eq!(names, [("b.bin", 2), ("pv1/deep/a.img", 1)]);
        assert!(open(&files[0]).is_ok());

        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("escape")).unwrap();
        std::os::unix::fs::symlink("b.bin", root.join("inside")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("dirlink")).unwrap();
        let problems = scan(root, LIMITS).unwrap_err().join("\n");
        for needle in [
            "escape is a symbolic link",
            "inside is a symbolic link",
            "dirlink is a symbolic link",
        ] {
            assert!(problems.contains(needle), "{problems}");
        }
    }

    #[test]
    fn a_scan_refuses_reserved_names_empty_and_oversized_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(scan(root, LIMITS).unwrap_err()[0].contains("no file"));
        std::fs::create_dir(root.join("only-a-directory")).unwrap();
        assert!(scan(root, LIMITS).unwrap_err()[0].contains("no file"));
        std::fs::write(root.join("metadata.json"), b"{}").unwrap();
        assert!(scan(root, LIMITS).unwrap_err()[0].contains("written by Sexton"));
        std::fs::remove_file(root.join("metadata.json")).unwrap();
        std::fs::write(root.join("big"), vec![0u8; 2000]).unwrap();
        let small = Limits {
            max_files: 100,
            max_bytes: 1000,
        };
        assert!(scan(root, small).unwrap_err()[0].contains("more than the 1000 allowed"));
        std::fs::write(root.join("big2"), b"x").unwrap();
        let few = Limits {
            max_files: 1,
            max_bytes: 1 << 20,
        };
        assert!(scan(root, few).unwrap_err()[0].contains("more than 1 files"));
        // A file name with a backslash made by the command is refused by name.
        std::fs::write(root.join("a\\b"), b"x").unwrap();
        assert!(scan(root, LIMITS)
            .unwrap_err()
            .join(" ")
            .contains("backslash"));
    }

    #[test]
    fn an_opened_file_must_be_the_one_scanned() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"one").unwrap();
        let files = scan(dir.path(), LIMITS).unwrap();
        std::fs::write(dir.path().join("f"), b"longer").unwrap();
        assert!(open(&files[0]).unwrap_err().contains("changed size"));
        std::fs::write(dir.path().join("f"), b"one").unwrap();
        // Another file of the same size in its place (the first kept, so its inode is not
        // handed to the newcomer).
        std::fs::rename(dir.path().join("f"), dir.path().join("kept")).unwrap();
        std::fs::write(dir.path().join("f"), b"two").unwrap();
        assert!(open(&files[0]).unwrap_err().contains("replaced"));
    }
}
