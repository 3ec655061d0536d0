//! The TCP ports a background process listens on, read from `/proc`: the processes under its
//! group's leader (by parent and process group in `/proc/<pid>/stat`), their socket inodes
//! (`/proc/<pid>/fd`), and the listening sockets of the service's network namespace
//! (`/proc/self/net/tcp{,6}`). A sandbox without the network gives the command a namespace of
//! its own: what it listens on there is reachable from nowhere, so it is not reported.

use std::collections::BTreeSet;
use std::fs;

/// The ports, in order; empty when none or when `/proc` cannot tell.
pub fn listening(pgid: libc::pid_t) -> Vec<u16> {
    // The sandbox's processes run in a session of their own under the group's leader: they are
    // found as its descendants. Only those in the service's network namespace can be reached.
    let inodes: BTreeSet<u64> = descendants(pgid)
        .into_iter()
        .filter(|&pid| same_network(pid))
        .flat_map(socket_inodes)
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut ports = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = fs::read_to_string(format!("/proc/self/net/{table}")) else {
            continue;
        };
        ports.extend(listening_in(&text, &inodes));
    }
    ports.into_iter().collect()
}

/// `leader` and every process below it, or in its process group.
fn descendants(leader: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, parent, group) of every process.
    let all: Vec<(libc::pid_t, libc::pid_t, libc::pid_t)> = entries
        .filter_map(|entry| {
            entry
                .ok()?
                .file_name()
                .to_str()?
                .parse::<libc::pid_t>()
                .ok()
        })
        .filter_map(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (parent, group) = parent_and_group(&stat)?;
            Some((pid, parent, group))
        })
        .collect();
    let mut found: Vec<libc::pid_t> = all
        .iter()
        .filter(|(pid, _, group)| *pid == leader || *group == leader)
        .map(|(pid, _, _)| *pid)
        .collect();
    let mut at = 0;
    while at < found.len() {
        let parent = found[at];
        for (pid, _, _) in all.iter().filter(|(_, of, _)| *of == parent) {
            if !found.contains(pid) {
                found.push(*pid);
            }
        }
        at += 1;
    }
    found
}

/// Fields 4 and 5 of `/proc/<pid>/stat` (parent, process group), after the name in
/// parentheses (which may hold anything).
fn parent_and_group(stat: &str) -> Option<(libc::pid_t, libc::pid_t)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(1);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Whether `pid` is in the service's own network namespace.
fn same_network(pid: libc::pid_t) -> bool {
    let theirs = fs::read_link(format!("/proc/{pid}/ns/net"));
    let ours = fs::read_link("/proc/self/ns/net");
    matches!((theirs, ours), (Ok(theirs), Ok(ours)) if theirs == ours)
}

fn socket_inodes(pid: libc::pid_t) -> Vec<u64> {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let target = fs::read_link(entry.ok()?.path()).ok()?;
            let target = target.to_str()?;
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The local ports of the listening sockets (state `0A`) of a `/proc/net/tcp` table whose
/// inode is one of `inodes`.
fn listening_in(table: &str, inodes: &BTreeSet<u64>) -> Vec<u16> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            if *state != "0A" || !inodes.contains(&inode.parse().ok()?) {
                return None;
            }
            u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_gives_the_listening_ports_of_the_sockets_named() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   \
1: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 100 0 0 10 0\n   \
2: 0100007F:1F92 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0000000000000000 100 0 0 10 0\n";
        let inodes = BTreeSet::from([4242, 4243]);
        assert_eq!(listening_in(table, &inodes), [8080]);
        assert_eq!(parent_and_group("12 (a) b) c) S 1 12 12 0"), Some((1, 12)));
    }

    #[test]
    fn a_listener_started_here_is_found_by_its_group() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // SAFETY: getpgrp(2) has no arguments and cannot fail.
        let pgid = unsafe { libc::getpgrp() };
        assert!(listening(pgid).contains(&port));
    }
}
