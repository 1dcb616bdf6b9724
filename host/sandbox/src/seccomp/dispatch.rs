//! One seccomp program for a whole call: a binary search on the system call
//! number in front of seccompiler's argument rules.
//!
//! The kernel's cost of a filter scales with the instructions it executes
//! per system call number, twice: once when it is installed (the kernel
//! emulates the new filter for every number of the architecture, under the
//! signal lock, to find the numbers it may skip the filter for), and at run
//! time for every number it could not skip. A seccompiler filter compares the
//! number against each listed call in turn, so nearly every number walks the
//! whole chain: about 400 instructions for the refused list. This module
//! lays the same verdicts out as a balanced tree of `JGE` on the sorted
//! numbers instead: about a dozen instructions for any number.
//!
//! Design decisions:
//!
//! - **Verdicts are data, the layout is generated.** [`assemble`] takes a
//!   table of numbers and what each gets (an errno at once, or the argument
//!   rules of that call); every number not in the table is allowed. It turns
//!   the table into intervals of equal verdict, so runs of refused numbers
//!   cost one leaf.
//! - **Argument rules stay seccompiler's.** A call whose refusal depends on
//!   its arguments gets a block: a complete seccompiler program for that one
//!   call (architecture check, number check, rules; allow when no rule
//!   holds). The tree jumps into it with `JA`; every path in a block ends in
//!   a `RET`, so the blocks need no knowledge of where they sit.
//! - **Only instructions the kernel's cache emulator understands.** The
//!   dispatcher uses `LD W ABS` of the number and architecture, `JGE`/`JA`
//!   and `RET`, so every number the tree allows outright is one the kernel
//!   skips the filter for.
//! - **Checked by running it.** The tests (`seccomp.rs`) run the assembled
//!   program in a small cBPF interpreter ([`cbpf`]) over every number and
//!   representative arguments and compare each verdict with the tables.

use seccompiler::{BpfProgram, sock_filter};

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
/// `seccomp_data.nr` and `seccomp_data.arch`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

/// What one system call number gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SyscallAction {
    Allow,
    /// Refused with this errno whatever its arguments.
    Errno(u32),
    /// Decided by the block at this index (seccompiler's argument rules).
    Rules(usize),
}

/// The seccomp return value of a verdict decided at once.
fn ret(verdict: SyscallAction) -> u32 {
    match verdict {
        SyscallAction::Errno(errno) => libc::SECCOMP_RET_ERRNO | (errno & libc::SECCOMP_RET_DATA),
        SyscallAction::Allow | SyscallAction::Rules(_) => libc::SECCOMP_RET_ALLOW,
    }
}

/// Numbers from `first` up to the next interval's `first` all get
/// `verdict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Interval {
    first: u32,
    verdict: SyscallAction,
}

/// One program: the architecture check (anything else kills the process,
/// as seccompiler's programs do), then the tree over `table` (number,
/// verdict; numbers unique), then `blocks`. Numbers from `foreign_from` up
/// (x86_64's x32 ABI, whose numbers have bit 30 set) get `foreign`.
pub(super) fn assemble(
    audit_arch: u32,
    table: &[(u32, SyscallAction)],
    foreign_from: Option<(u32, SyscallAction)>,
    blocks: &[BpfProgram],
) -> Result<BpfProgram, String> {
    let intervals = intervals(table, foreign_from)?;
    if let Some((number, _)) = table
        .iter()
        .find(|(_, v)| matches!(v, SyscallAction::Rules(i) if *i >= blocks.len()))
    {
        return Err(format!("system call {number} names a missing rule block"));
    }
    let mut program: Vec<Op> = vec![
        Op::Real(stmt(LD_W_ABS, OFFSET_ARCH)),
        Op::Real(jump(JEQ_K, audit_arch, 1, 0)),
        Op::Real(stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS)),
        Op::Real(stmt(LD_W_ABS, OFFSET_NR)),
    ];
    program.extend(pooled(&intervals).unwrap_or_else(|| tree(&intervals)));
    let mut block_start = Vec::with_capacity(blocks.len());
    let mut next = program.len();
    for block in blocks {
        block_start.push(next);
        next += block.len();
    }
    let mut assembled: BpfProgram = program
        .iter()
        .enumerate()
        .map(|(pc, op)| match op {
            Op::Real(instruction) => instruction.clone(),
            Op::ToBlock(index) => stmt(JA, (block_start[*index] - pc - 1) as u32),
        })
        .collect();
    for block in blocks {
        assembled.extend_from_slice(block);
    }
    Ok(assembled)
}

/// The rules of seccompiler's program for the one call `number`, to be
/// entered with the accumulator holding that number: its prefix (the
/// architecture check, the load of the number and the test of it, which
/// the dispatcher has done) is dropped. cBPF only jumps forward, so
/// nothing that is kept jumps into the prefix; the prefix is checked to be
/// exactly what seccompiler emits, so a new seccompiler layout fails here
/// rather than filter wrongly.
pub(super) fn rule_block(
    program: &[sock_filter],
    audit_arch: u32,
    number: u32,
) -> Result<BpfProgram, String> {
    let prefix = [
        stmt(LD_W_ABS, OFFSET_ARCH),
        jump(JEQ_K, audit_arch, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFFSET_NR),
        jump(JEQ_K, number, 0, 1),
    ];
    match program.split_at_checked(prefix.len()) {
        Some((head, rules)) if head == prefix && !rules.is_empty() => Ok(rules.to_vec()),
        _ => Err(format!(
            "seccompiler's program for system call {number} does not start as expected"
        )),
    }
}

/// An instruction, or a jump to a block whose place is known only once the
/// whole tree is laid out.
#[derive(Debug, Clone)]
enum Op {
    Real(sock_filter),
    ToBlock(usize),
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The number line from 0 cut where the verdict changes.
fn intervals(
    table: &[(u32, SyscallAction)],
    foreign_from: Option<(u32, SyscallAction)>,
) -> Result<Vec<Interval>, String> {
    let mut sorted = table.to_vec();
    sorted.sort_unstable_by_key(|(number, _)| *number);
    if let Some(pair) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("system call {} is listed twice", pair[0].0));
    }
    if let (Some((foreign, _)), Some((last, _))) = (foreign_from, sorted.last())
        && *last >= foreign
    {
        return Err(format!(
            "system call {last} lies in the foreign ABI's numbers"
        ));
    }
    let mut intervals: Vec<Interval> = Vec::new();
    let mut push = |first: u32, verdict: SyscallAction| {
        // A number right after the previous one replaces the allow that
        // followed it; equal neighbours (but rule blocks) merge.
        if intervals.last().is_some_and(|last| last.first == first) {
            intervals.pop();
        }
        let mergeable = matches!(verdict, SyscallAction::Allow | SyscallAction::Errno(_));
        if !(mergeable && intervals.last().is_some_and(|last| last.verdict == verdict)) {
            intervals.push(Interval { first, verdict });
        }
    };
    push(0, SyscallAction::Allow);
    for &(number, verdict) in &sorted {
        push(number, verdict);
        if let Some(after) = number.checked_add(1) {
            push(after, SyscallAction::Allow);
        }
    }
    if let Some((first, verdict)) = foreign_from {
        push(first, verdict);
    }
    Ok(intervals)
}

/// The tree of [`tree`] with its leaves shared: each `JGE` jumps straight
/// to one of a pool of answers after the tree (`RET` of each verdict, `JA`
/// to each block), so the tree costs one instruction per interval, not
/// two. `None` when a jump would be longer than a conditional jump can
/// reach (255 instructions); then the leaves are inline.
fn pooled(intervals: &[Interval]) -> Option<Vec<Op>> {
    if intervals.len() < 2 {
        return None;
    }
    let nodes = pooled_nodes(intervals)?;
    let mut pool: Vec<SyscallAction> = Vec::new();
    for node in &nodes {
        for dest in [node.upper, node.lower] {
            if let Dest::Leaf(verdict) = dest
                && !pool.contains(&verdict)
            {
                pool.push(verdict);
            }
        }
    }
    let pool_start = nodes.len();
    let mut ops = Vec::with_capacity(nodes.len() + pool.len());
    for (index, node) in nodes.iter().enumerate() {
        let offset = |dest: Dest| -> Option<u8> {
            match dest {
                Dest::Skip(n) => Some(n),
                Dest::Leaf(verdict) => {
                    let at = pool_start + pool.iter().position(|v| *v == verdict)?;
                    u8::try_from(at - index - 1).ok()
                }
            }
        };
        ops.push(Op::Real(jump(
            JGE_K,
            node.split,
            offset(node.upper)?,
            offset(node.lower)?,
        )));
    }
    ops.extend(pool.into_iter().map(|verdict| match verdict {
        SyscallAction::Rules(index) => Op::ToBlock(index),
        verdict => Op::Real(stmt(RET_K, ret(verdict))),
    }));
    Some(ops)
}

/// Where a pooled `JGE` goes on one side.
#[derive(Debug, Clone, Copy)]
enum Dest {
    /// This many instructions ahead (a subtree).
    Skip(u8),
    /// The pool's answer for this verdict.
    Leaf(SyscallAction),
}

#[derive(Debug, Clone, Copy)]
struct Node {
    split: u32,
    upper: Dest,
    lower: Dest,
}

/// The `JGE`s of a pooled tree over at least two intervals, in preorder.
fn pooled_nodes(intervals: &[Interval]) -> Option<Vec<Node>> {
    let middle = intervals.len() / 2;
    let (lower, upper) = intervals.split_at(middle);
    let side = |half: &[Interval]| -> Option<(Dest, Vec<Node>)> {
        match half {
            [only] => Some((Dest::Leaf(only.verdict), Vec::new())),
            _ => Some((Dest::Skip(0), pooled_nodes(half)?)),
        }
    };
    let (lower_dest, lower_nodes) = side(lower)?;
    let (upper_dest, upper_nodes) = side(upper)?;
    let upper_dest = match upper_dest {
        Dest::Skip(_) => Dest::Skip(u8::try_from(lower_nodes.len()).ok()?),
        leaf => leaf,
    };
    let mut nodes = Vec::with_capacity(1 + lower_nodes.len() + upper_nodes.len());
    nodes.push(Node {
        split: upper[0].first,
        upper: upper_dest,
        lower: lower_dest,
    });
    nodes.extend(lower_nodes);
    nodes.extend(upper_nodes);
    Some(nodes)
}

/// A balanced tree of `JGE` over `intervals` (the accumulator holds the
/// number): preorder, the lower half right after the test, the upper half
/// after it.
fn tree(intervals: &[Interval]) -> Vec<Op> {
    if let [only] = intervals {
        return vec![match only.verdict {
            SyscallAction::Rules(index) => Op::ToBlock(index),
            verdict => Op::Real(stmt(RET_K, ret(verdict))),
        }];
    }
    let middle = intervals.len() / 2;
    let lower = tree(&intervals[..middle]);
    let upper = tree(&intervals[middle..]);
    let split = intervals[middle].first;
    let mut ops = Vec::with_capacity(lower.len() + upper.len() + 2);
    match u8::try_from(lower.len()) {
        Ok(skip) => ops.push(Op::Real(jump(JGE_K, split, skip, 0))),
        Err(_) => {
            // Too far for a conditional jump: through a `JA`.
            ops.push(Op::Real(jump(JGE_K, split, 0, 1)));
            ops.push(Op::Real(stmt(JA, lower.len() as u32)));
        }
    }
    ops.extend(lower);
    ops.extend(upper);
    ops
}

/// A cBPF interpreter for the instructions seccomp programs here use, to
/// check programs against the tables they were made from.
#[cfg(test)]
pub(super) mod cbpf {
    use seccompiler::sock_filter;

    /// `struct seccomp_data`, as the filter sees it.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Data {
        pub nr: u32,
        pub arch: u32,
        pub args: [u64; 6],
    }

    impl Data {
        /// The 32-bit word at byte `offset` (little-endian, as on both
        /// supported architectures).
        fn word(&self, offset: u32) -> u32 {
            match offset {
                0 => self.nr,
                4 => self.arch,
                16..=63 if offset.is_multiple_of(4) => {
                    let arg = self.args[((offset - 16) / 8) as usize];
                    if offset.is_multiple_of(8) {
                        arg as u32
                    } else {
                        (arg >> 32) as u32
                    }
                }
                _ => panic!("load from offset {offset} (the instruction pointer is never read)"),
            }
        }
    }

    /// How a run ended.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Outcome {
        /// The seccomp return value.
        pub ret: u32,
        /// Instructions executed.
        pub steps: usize,
        /// Whether an argument was loaded (the kernel's allow cache treats
        /// such a verdict as not constant).
        pub read_args: bool,
    }

    /// Run `program` on `data`. Panics on an instruction it does not know,
    /// a jump out of the program, or falling off its end (the kernel
    /// rejects those programs).
    pub(crate) fn run(program: &[sock_filter], data: &Data) -> Outcome {
        let mut a: u32 = 0;
        let mut pc = 0usize;
        let mut steps = 0;
        let mut read_args = false;
        loop {
            let op = program
                .get(pc)
                .unwrap_or_else(|| panic!("pc {pc} past the end"));
            steps += 1;
            let (jt, jf) = (usize::from(op.jt), usize::from(op.jf));
            pc += 1;
            match op.code {
                0x20 => {
                    read_args |= op.k >= 16;
                    a = data.word(op.k);
                }
                0x54 => a &= op.k,
                0x06 => {
                    return Outcome {
                        ret: op.k,
                        steps,
                        read_args,
                    };
                }
                0x05 => pc += op.k as usize,
                0x15 => pc += if a == op.k { jt } else { jf },
                0x25 => pc += if a > op.k { jt } else { jf },
                0x35 => pc += if a >= op.k { jt } else { jf },
                0x45 => pc += if a & op.k != 0 { jt } else { jf },
                code => panic!("instruction {code:#x} at {}", pc - 1),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cbpf::{Data, run};
    use super::*;

    const ARCH: u32 = 0xc000_003e;

    fn verdict_of(program: &[sock_filter], nr: u32) -> u32 {
        let data = Data {
            nr,
            arch: ARCH,
            args: [0; 6],
        };
        run(program, &data).ret
    }

    #[test]
    fn every_number_gets_its_tables_verdict_and_runs_and_merges_cut_the_tree() {
        let block = vec![stmt(RET_K, libc::SECCOMP_RET_ERRNO | 99)];
        let table = [
            (0, SyscallAction::Errno(1)),
            (5, SyscallAction::Errno(1)),
            (6, SyscallAction::Errno(1)),
            (7, SyscallAction::Errno(2)),
            (9, SyscallAction::Rules(0)),
            (10, SyscallAction::Rules(1)),
            (300, SyscallAction::Errno(1)),
        ];
        let program = assemble(
            ARCH,
            &table,
            Some((0x4000_0000, SyscallAction::Errno(38))),
            &[block.clone(), block],
        )
        .unwrap();
        for nr in (0..400).chain([0x3fff_ffff, 0x4000_0000, 0x4000_0005, u32::MAX]) {
            let expected = match table.iter().find(|(n, _)| *n == nr) {
                Some((_, SyscallAction::Rules(_))) => libc::SECCOMP_RET_ERRNO | 99,
                Some((_, v)) => ret(*v),
                None if nr >= 0x4000_0000 => libc::SECCOMP_RET_ERRNO | 38,
                None => libc::SECCOMP_RET_ALLOW,
            };
            assert_eq!(verdict_of(&program, nr), expected, "number {nr}");
        }
        // 0 | 1-4 | 5-6 | 7 | 8 | 9 | 10 | 11-299 | 300 | 301.. | x32
        assert_eq!(
            intervals(&table, Some((0x4000_0000, SyscallAction::Errno(38))))
                .unwrap()
                .len(),
            11
        );
    }

    #[test]
    fn another_architecture_is_killed() {
        let program = assemble(ARCH, &[(1, SyscallAction::Errno(1))], None, &[]).unwrap();
        let data = Data {
            nr: 1,
            arch: 0x4000_0003, // i386
            args: [0; 6],
        };
        assert_eq!(run(&program, &data).ret, libc::SECCOMP_RET_KILL_PROCESS);
    }

    /// Every number below `upto`: refused with errno 1 when odd and below
    /// `limit`, else allowed.
    fn assert_odd_numbers_refused_below(program: &[sock_filter], limit: u32, upto: u32) {
        for nr in 0..upto {
            let expected = if nr % 2 == 1 && nr < limit {
                libc::SECCOMP_RET_ERRNO | 1
            } else {
                libc::SECCOMP_RET_ALLOW
            };
            assert_eq!(verdict_of(program, nr), expected, "number {nr}");
        }
    }

    #[test]
    fn a_tree_too_wide_for_a_conditional_jump_goes_through_ja() {
        // Every other number refused: 1,000 intervals, halves far beyond 255.
        let table: Vec<_> = (0..500)
            .map(|n| (n * 2 + 1, SyscallAction::Errno(1)))
            .collect();
        let program = assemble(ARCH, &table, None, &[]).unwrap();
        assert_odd_numbers_refused_below(&program, 1000, 1100);
    }

    #[test]
    fn leaves_are_shared_when_the_tree_is_small_enough() {
        // 1 | 2 | 3 ... alternating refused and allowed: 41 intervals.
        let table: Vec<_> = (0..20)
            .map(|n| (n * 2 + 1, SyscallAction::Errno(1)))
            .collect();
        let program = assemble(ARCH, &table, None, &[]).unwrap();
        // 4 of head, 40 tests, 2 answers (allow, errno 1).
        assert_eq!(program.len(), 4 + 40 + 2);
        assert_odd_numbers_refused_below(&program, 40, 50);
    }

    #[test]
    fn a_rule_block_is_taken_only_from_the_layout_it_expects() {
        let rules = stmt(RET_K, libc::SECCOMP_RET_ERRNO | 1);
        let mut program = vec![
            stmt(LD_W_ABS, OFFSET_ARCH),
            jump(JEQ_K, ARCH, 1, 0),
            stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
            stmt(LD_W_ABS, OFFSET_NR),
            jump(JEQ_K, 7, 0, 1),
            rules.clone(),
        ];
        assert_eq!(rule_block(&program, ARCH, 7).unwrap(), vec![rules]);
        assert!(rule_block(&program, ARCH, 8).is_err(), "another number");
        assert!(
            rule_block(&program, ARCH + 1, 7).is_err(),
            "another architecture"
        );
        program[4].jf = 2;
        assert!(rule_block(&program, ARCH, 7).is_err(), "another layout");
        assert!(rule_block(&program[..5], ARCH, 7).is_err(), "no rules");
    }

    #[test]
    fn a_table_that_contradicts_itself_is_refused() {
        let twice = [(3, SyscallAction::Errno(1)), (3, SyscallAction::Errno(2))];
        assert!(assemble(ARCH, &twice, None, &[]).is_err());
        let missing_block = [(3, SyscallAction::Rules(0))];
        assert!(assemble(ARCH, &missing_block, None, &[]).is_err());
        let in_foreign = [(0x4000_0001, SyscallAction::Errno(1))];
        assert!(
            assemble(
                ARCH,
                &in_foreign,
                Some((0x4000_0000, SyscallAction::Allow)),
                &[]
            )
            .is_err()
        );
    }
}
