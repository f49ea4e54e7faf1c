//! The executor side of the contract (`docs/executors.md`), in a crate of its own so that the
//! `sexton` binary, the tests and the local run start it the same way: the reference executor
//! ([`reference`]), `sexton exec` ([`exec`]: the user's command run for each job, its uploads,
//! merges and restore tests) and the binlog shipping behind `sexton binlog append`
//! ([`binlog_append`], [`binlog_file`]).

pub mod binlog_append;
pub mod binlog_file;
pub mod exec;
pub mod fetch;
pub mod reference;

/// `1 backup`, `2 backups`: a count with its noun, as a person writes it.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod count_tests {
    #[test]
    fn one_is_singular() {
        assert_eq!(super::count(1, "backup"), "1 backup");
        assert_eq!(super::count(0, "log segment"), "0 log segments");
        assert_eq!(super::count(3, "object"), "3 objects");
    }
}
