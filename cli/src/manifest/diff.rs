//! The unified diff `sexton diff` prints between what the fleet has and what the manifests say.

/// A unified diff of two texts, whole (every line, `-` removed, `+` added, ` ` both), with
/// the headers `diff -u` writes; empty when they are equal.
pub fn unified_diff(from_label: &str, to_label: &str, from: &str, to: &str) -> String {
    if from == to {
        return String::new();
    }
    let a: Vec<&str> = from.lines().collect();
    let b: Vec<&str> = to.lines().collect();
    // Longest common subsequence, by dynamic programming (specs are short).
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = format!("--- {from_label}\n+++ {to_label}\n");
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        }
    }
    out
}
