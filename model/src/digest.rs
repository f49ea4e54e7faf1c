//! SHA-256 digests as Sexton writes them: lowercase hex. Executors report one per object and
//! write it into `metadata.json`; intake compares the two, verification reads the object back
//! and recomputes it. Also short digests for message ids that must change with their content.

pub use sha2::{Digest, Sha256};

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 0xf) as usize] as char);
    }
    out
}

/// The SHA-256 of `bytes`, in lowercase hex (64 digits).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The SHA-256 of everything `reader` gives, in lowercase hex, read in 1 MiB pieces (never
/// whole in memory). The caller opens the file (or whatever it reads): this module does no
/// I/O of its own.
pub fn reader_sha256(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Whether `text` looks like a SHA-256 in lowercase hex.
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The first 16 hex digits of a SHA-256 over `items`, each ended by a newline (which no key or
/// id holds): a short id that changes whenever the list does.
pub fn short_digest<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut hasher = Sha256::new();
    for item in items {
        hasher.update(item.as_bytes());
        hasher.update(b"\n");
    }
    hex(&hasher.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_sha256_hex(&sha256_hex(b"")));
        assert!(!is_sha256_hex(
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
        ));
        assert!(!is_sha256_hex("abc"));
        assert_eq!(short_digest(["a", "b"]).len(), 16);
        // A reader, in pieces smaller and larger than its buffer, gives the bytes' digest.
        let big = vec![7u8; (1 << 20) + 3];
        assert_eq!(reader_sha256(&big[..]).unwrap(), sha256_hex(&big));
        assert_eq!(reader_sha256(&b"abc"[..]).unwrap(), sha256_hex(b"abc"));
        assert_ne!(short_digest(["ab"]), short_digest(["a", "b"]));
    }
}
