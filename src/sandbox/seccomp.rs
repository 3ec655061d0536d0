//! The system-call filter, installed last in the launcher (it then holds for the program and
//! everything it starts; a filter can never be removed):
//! - sockets: with the network off and no network namespace of its own, only UNIX sockets;
//!   otherwise UNIX, routing netlink and TCP/UDP (and ping) over IPv4 and IPv6. Never raw or
//!   packet sockets, and never MPTCP or SCTP, which no Landlock rule covers;
//! - no io_uring, which can open sockets and files without the system calls this filter sees,
//!   and no `clone3`, whose flags a filter cannot read (C libraries then use `clone`);
//! - no new user namespace (which would give a process every capability again inside it), no
//!   mounts or namespace switches, no kernel keyrings, modules, BPF, performance counters or
//!   `userfaultfd`, and no typing into a terminal (`TIOCSTI`);
//! - on x86-64, no x32 system calls, which use other numbers for the same calls.
//!
//! Refused calls fail with `EPERM` (`ENOSYS` for those a C library falls back from).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::spec::LaunchSpec;

pub(super) fn install(spec: &LaunchSpec) -> Result<(), String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|error| format!("seccomp: {error}"))?;
    let inet = spec.network || spec.namespaces;
    let refused = filter(refused_calls(inet), libc::EPERM, arch)?;
    let missing = filter(missing_calls(), libc::ENOSYS, arch)?;
    #[cfg(target_arch = "x86_64")]
    apply(&x32_guard())?;
    apply(&refused)?;
    apply(&missing)
}

fn filter(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<BpfProgram, String> {
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|error| format!("seccomp: {error}"))
}

fn apply(program: &BpfProgram) -> Result<(), String> {
    seccompiler::apply_filter(program).map_err(|error| format!("seccomp: {error}"))
}

/// A condition on a system call's `index`th argument, as a 32-bit value.
fn arg(index: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
        .expect("argument indexes here are below 6")
}

fn rule(conditions: Vec<SeccompCondition>) -> SeccompRule {
    SeccompRule::new(conditions).expect("every rule here has a condition")
}

/// Refused outright, or with these arguments.
fn refused_calls(inet: bool) -> BTreeMap<i64, Vec<SeccompRule>> {
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    let family = |op, family: i32| arg(0, op, family as u64);
    let mut sockets = Vec::new();
    if inet {
        // Families other than UNIX, IPv4, IPv6 and netlink.
        sockets.push(rule(vec![
            family(Ne, libc::AF_UNIX),
            family(Ne, libc::AF_INET),
            family(Ne, libc::AF_INET6),
            family(Ne, libc::AF_NETLINK),
        ]));
        // Netlink only for routing information (what name lookups ask).
        sockets.push(rule(vec![
            family(Eq, libc::AF_NETLINK),
            arg(2, Ne, libc::NETLINK_ROUTE as u64),
        ]));
        for inet_family in [libc::AF_INET, libc::AF_INET6] {
            // Only stream and datagram sockets (the type's low bits; the rest are flags).
            for kind in [
                libc::SOCK_RAW,
                libc::SOCK_RDM,
                libc::SOCK_SEQPACKET,
                libc::SOCK_DCCP,
                // The obsolete packet type (10), which `libc` marks deprecated.
                10,
            ] {
                sockets.push(rule(vec![
                    family(Eq, inet_family),
                    arg(1, MaskedEq(0xf), kind as u64),
                ]));
            }
            // Only TCP, UDP and ICMP (ping); MPTCP, SCTP and the rest are refused.
            sockets.push(rule(vec![
                family(Eq, inet_family),
                arg(2, Ne, 0),
                arg(2, Ne, libc::IPPROTO_TCP as u64),
                arg(2, Ne, libc::IPPROTO_UDP as u64),
                arg(2, Ne, libc::IPPROTO_ICMP as u64),
                arg(2, Ne, libc::IPPROTO_ICMPV6 as u64),
            ]));
        }
    } else {
        sockets.push(rule(vec![family(Ne, libc::AF_UNIX)]));
    }
    let new_user_namespace = || {
        vec![rule(vec![arg(
            0,
            MaskedEq(libc::CLONE_NEWUSER as u64),
            libc::CLONE_NEWUSER as u64,
        )])]
    };
    // `libc` gives ioctl numbers another type with another C library.
    #[allow(clippy::unnecessary_cast)]
    let typing = vec![
        rule(vec![arg(1, Eq, libc::TIOCSTI as u64)]),
        rule(vec![arg(1, Eq, libc::TIOCLINUX as u64)]),
    ];
    let mut calls = BTreeMap::from([
        (libc::SYS_socket, sockets),
        (libc::SYS_unshare, new_user_namespace()),
        (libc::SYS_clone, new_user_namespace()),
        (libc::SYS_ioctl, typing),
    ]);
    for always in [
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_open_by_handle_at,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
    ] {
        calls.insert(always, Vec::new());
    }
    calls
}

/// Refused as if the kernel did not have them, so C libraries fall back to older calls.
fn missing_calls() -> BTreeMap<i64, Vec<SeccompRule>> {
    [
        libc::SYS_clone3,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
    .into_iter()
    .map(|call| (call, Vec::new()))
    .collect()
}

/// On x86-64, a system call number with bit 30 set is an x32 call: the same calls under other
/// numbers, which the filters above would let through. A few instructions written out: any such
/// call fails with `ENOSYS`.
#[cfg(target_arch = "x86_64")]
fn x32_guard() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const X32_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // seccomp_data.arch is at offset 4, .nr at 0.
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, 0),
        op(JGE_K, 0, 1, X32_BIT),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_machine() {
        let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
        for inet in [false, true] {
            let program = filter(refused_calls(inet), libc::EPERM, arch).unwrap();
            assert!(program.len() > 20, "{}", program.len());
        }
        assert!(
            !filter(missing_calls(), libc::ENOSYS, arch)
                .unwrap()
                .is_empty()
        );
        // The network off with no namespace: one rule, UNIX sockets only.
        assert_eq!(refused_calls(false)[&libc::SYS_socket].len(), 1);
        assert_eq!(refused_calls(true)[&libc::SYS_socket].len(), 14);
    }
}
