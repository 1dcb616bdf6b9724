//! Which local account the other end of a loopback connection belongs to:
//! what lets a server with no `[http]` authentication serve only the
//! account it runs as (`auth.rs`), as stdio does.
//!
//! Without tokens the server listens on the loopback only, but every
//! account of the machine (and every container sharing its network
//! namespace) reaches the loopback. The client's socket is a socket of
//! this machine, so the kernel knows its owner: `/proc/net/tcp` and
//! `/proc/net/tcp6` list every TCP socket of the reading process's network
//! namespace with the uid that created it. The connection's client socket
//! is the row whose local address is the connection's peer address and
//! whose remote address is the server's.
//!
//! Design decisions:
//!
//! - **Fail closed.** A table that cannot be read, a line this parser
//!   does not understand, no matching row, or a row that is not a live
//!   socket (a `TIME_WAIT` remnant or a socket its process closed: the
//!   kernel shows those with inode 0 and, for the remnants, uid 0, which
//!   would read as root) is an error, and the caller refuses the request.
//!   A uid the reader's user namespace cannot name shows as the overflow
//!   uid (65534), never as the server's.
//! - **A strict parser of our own** rather than a crate: four columns
//!   are read (addresses, uid, inode), the header and every field's shape
//!   are checked, and nothing is guessed.
//! - **One look per connection** ([`PeerSocket`]): a connection's client
//!   socket does not change owner, and the 4-tuple is unique while the
//!   server holds its end, so the answer is kept for the connection's
//!   later requests. The table can change while it is read (rows may be
//!   skipped between two reads of the file), so a missing row is looked
//!   for once more before the connection is refused.
//! - **Addresses as the kernel writes them:** each 32-bit word of an
//!   address is printed as a native-endian number, so the bytes are the
//!   word's native-endian bytes (`0100007F` is 127.0.0.1 on x86). An
//!   IPv4-mapped IPv6 address (a dual-stack socket) compares as its IPv4
//!   address.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The kernel's TCP socket tables of this network namespace.
const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];

/// Why a connection's owner is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PeerUidError {
    #[error("the kernel's socket table {table} could not be read ({why})")]
    Unreadable { table: String, why: String },
    #[error("line {line} of the kernel's socket table {table} is not in the expected format")]
    Malformed { table: String, line: usize },
    #[error("no socket of this machine is the connection's other end ({peer})")]
    NotFound { peer: SocketAddr },
    #[error("the connection's other end ({peer}) is a socket no process holds any more")]
    Gone { peer: SocketAddr },
    #[error("two sockets claim to be the connection's other end ({peer})")]
    Ambiguous { peer: SocketAddr },
    #[error("the server's own address on the connection is not known")]
    NoServerAddress,
}

/// One connection's two ends, and the owner of the client's end once
/// looked up (per connection: see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct PeerSocket {
    peer: SocketAddr,
    ours: Option<SocketAddr>,
    owner: Arc<OnceLock<Result<u32, PeerUidError>>>,
}

impl PeerSocket {
    /// The connection from `peer` to the server's `ours`.
    pub(crate) fn new(peer: SocketAddr, ours: Option<SocketAddr>) -> PeerSocket {
        PeerSocket {
            peer,
            ours,
            owner: Arc::new(OnceLock::new()),
        }
    }

    /// The client's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The uid that owns the client's socket.
    pub(crate) fn uid(&self) -> Result<u32, PeerUidError> {
        self.owner
            .get_or_init(|| match self.ours {
                Some(ours) => uid_of(self.peer, ours),
                None => Err(PeerUidError::NoServerAddress),
            })
            .clone()
    }
}

/// The uid owning the socket at `peer` connected to `ours`, from the
/// kernel's tables (a second look when it is not found at first).
pub(crate) fn uid_of(peer: SocketAddr, ours: SocketAddr) -> Result<u32, PeerUidError> {
    let tables = TABLES.map(Path::new);
    match uid_in(&tables, peer, ours) {
        Err(PeerUidError::NotFound { .. }) => uid_in(&tables, peer, ours),
        found => found,
    }
}

/// [`uid_of`] in `tables`, looked at once.
fn uid_in(tables: &[&Path], peer: SocketAddr, ours: SocketAddr) -> Result<u32, PeerUidError> {
    let (peer, ours) = (canonical(peer), canonical(ours));
    let mut found: Option<Row> = None;
    for table in tables {
        let name = table.display().to_string();
        let unreadable = |e: std::io::Error| PeerUidError::Unreadable {
            table: name.clone(),
            why: e.to_string(),
        };
        let file = match File::open(table) {
            Ok(file) => file,
            // A kernel without IPv6 has no tcp6: no socket is there.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && name.ends_with('6') => continue,
            Err(e) => return Err(unreadable(e)),
        };
        for row in rows(BufReader::new(file), &name) {
            let row = row?;
            if row.local != peer || row.remote != ours {
                continue;
            }
            match &found {
                // A row read twice while the table changed.
                Some(seen) if *seen == row => {}
                Some(_) => return Err(PeerUidError::Ambiguous { peer }),
                None => found = Some(row),
            }
        }
    }
    match found {
        None => Err(PeerUidError::NotFound { peer }),
        // Inode 0: no process holds it (closed, or a TIME_WAIT remnant
        // whose uid column says 0 whoever owned it).
        Some(row) if row.inode == 0 || row.state == TIME_WAIT => Err(PeerUidError::Gone { peer }),
        Some(row) => Ok(row.uid),
    }
}

/// The `st` column of a `TIME_WAIT` remnant.
const TIME_WAIT: u8 = 0x06;

/// One socket of a table: the columns this module reads.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    local: SocketAddr,
    remote: SocketAddr,
    state: u8,
    uid: u32,
    inode: u64,
}

/// The rows of a table read from `reader`, each checked; an error for the
/// first line that is not one (then nothing more is read).
fn rows<R: BufRead>(reader: R, table: &str) -> impl Iterator<Item = Result<Row, PeerUidError>> {
    let table = table.to_owned();
    let mut failed = false;
    reader.lines().enumerate().filter_map(move |(index, line)| {
        if failed {
            return None;
        }
        let line_number = index + 1;
        let parsed = match line {
            Err(e) => Err(PeerUidError::Unreadable {
                table: table.clone(),
                why: e.to_string(),
            }),
            Ok(line) if index == 0 => {
                if is_header(&line) {
                    return None;
                }
                Err(malformed(&table, line_number))
            }
            Ok(line) => parse_row(&line).ok_or_else(|| malformed(&table, line_number)),
        };
        failed = parsed.is_err();
        Some(parsed)
    })
}

fn malformed(table: &str, line: usize) -> PeerUidError {
    PeerUidError::Malformed {
        table: table.to_owned(),
        line,
    }
}

/// The tables' header, word by word (the kernel writes `tx_queue
/// rx_queue` over one column, `tr tm->when` over another; `tcp6` spells
/// the third `remote_address`): the columns read are where this parser
/// expects them.
const HEADER_WORDS: [&str; 12] = [
    "sl",
    "local_address",
    "rem_address|remote_address",
    "st",
    "tx_queue",
    "rx_queue",
    "tr",
    "tm->when",
    "retrnsmt",
    "uid",
    "timeout",
    "inode",
];

/// Whether `line` is the tables' header.
fn is_header(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.len() == HEADER_WORDS.len()
        && words
            .iter()
            .zip(HEADER_WORDS)
            .all(|(word, expected)| expected.split('|').any(|e| e == *word))
}

/// One row: `sl: local remote st tx:rx tr:when retrnsmt uid timeout inode ...`.
fn parse_row(line: &str) -> Option<Row> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 10 {
        return None;
    }
    let slot = fields[0].strip_suffix(':')?;
    if slot.is_empty() || !slot.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let state = fields[3];
    if state.len() != 2 {
        return None;
    }
    Some(Row {
        local: parse_address(fields[1])?,
        remote: parse_address(fields[2])?,
        state: u8::from_str_radix(state, 16).ok()?,
        uid: decimal(fields[7])?,
        inode: decimal(fields[9])?,
    })
}

/// A decimal number of digits only (no sign, no spaces).
fn decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `ADDR:PORT` as the kernel prints it: 8 (IPv4) or 32 (IPv6) hex digits,
/// each 32-bit word a native-endian number, and 4 hex digits of port.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (address, port) = text.split_once(':')?;
    if port.len() != 4 {
        return None;
    }
    let port = hex_u32(port)?;
    let words: Vec<u32> = match address.len() {
        8 | 32 => address
            .as_bytes()
            .chunks(8)
            .map(|word| std::str::from_utf8(word).ok().and_then(hex_u32))
            .collect::<Option<_>>()?,
        _ => return None,
    };
    let ip = if let [word] = words[..] {
        IpAddr::V4(Ipv4Addr::from(word.to_ne_bytes()))
    } else {
        let mut bytes = [0u8; 16];
        for (chunk, word) in bytes.chunks_mut(4).zip(&words) {
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        IpAddr::V6(Ipv6Addr::from(bytes))
    };
    Some(canonical(SocketAddr::new(ip, u16::try_from(port).ok()?)))
}

/// Hex digits only (no sign, no prefix), as a number.
fn hex_u32(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// `address` with an IPv4-mapped IPv6 address as its IPv4 address.
fn canonical(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(address.ip().to_canonical(), address.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

    #[test]
    fn both_tables_headers_are_known_and_another_is_not() {
        assert!(is_header(HEADER));
        assert!(is_header(
            "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
        ));
        assert!(!is_header(&HEADER.replace("uid", "gid")));
        assert!(!is_header(&format!("{HEADER} extra")));
    }

    /// A table file in `dir` holding `rows` under the header.
    fn table(dir: &Path, name: &str, rows: &[&str]) -> std::path::PathBuf {
        let path = dir.join(name);
        let mut text = format!("{HEADER}\n");
        for row in rows {
            text.push_str(row);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `address` as the kernel prints it on this machine.
    fn printed(address: SocketAddr) -> String {
        let ip = match address.ip() {
            IpAddr::V4(ip) => format!("{:08X}", u32::from_ne_bytes(ip.octets())),
            IpAddr::V6(ip) => ip
                .octets()
                .chunks(4)
                .map(|w| format!("{:08X}", u32::from_ne_bytes(w.try_into().unwrap())))
                .collect(),
        };
        format!("{ip}:{:04X}", address.port())
    }

    fn row(local: SocketAddr, remote: SocketAddr, state: &str, uid: u32, inode: u64) -> String {
        format!(
            "   3: {} {} {state} 00000000:00000000 00:00000000 00000000 {uid:>5}        0 {inode} 1 0000000000000000 20 4 30 10 -1",
            printed(local),
            printed(remote)
        )
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_kernels_spelling_of_an_address_is_read() {
        let v4 = addr("127.0.0.1:8750");
        assert_eq!(parse_address(&printed(v4)), Some(v4));
        let v6 = addr("[::1]:443");
        assert_eq!(parse_address(&printed(v6)), Some(v6));
        // A dual-stack socket's mapped address is its IPv4 address.
        let mapped = addr("[::ffff:127.0.0.1]:8750");
        assert_eq!(parse_address(&printed(mapped)), Some(v4));
        if cfg!(target_endian = "little") {
            assert_eq!(parse_address("0100007F:222E"), Some(v4));
        }
        for bad in [
            "0100007F",
            "0100007F:223",
            "0100007F:22366",
            "100007F:2236",
            "0100007G:2236",
            "+100007F:2236",
            "0100007F0100007F:2236",
            "",
        ] {
            assert_eq!(parse_address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_client_socket_of_the_connection_names_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let (client, server) = (addr("127.0.0.1:40000"), addr("127.0.0.1:8750"));
        let tcp = table(
            dir.path(),
            "tcp",
            &[
                // The listener, the server's end, another client: not it.
                &row(server, addr("0.0.0.0:0"), "0A", 0, 11),
                &row(server, client, "01", 0, 12),
                &row(addr("127.0.0.1:40001"), server, "01", 1000, 13),
                &row(client, server, "01", 65534, 14),
            ],
        );
        assert_eq!(uid_in(&[&tcp], client, server), Ok(65534));
        // A dual-stack client's row in tcp6, under its mapped address.
        let tcp6 = table(
            dir.path(),
            "tcp6",
            &[&row(
                addr("[::ffff:127.0.0.1]:40002"),
                addr("[::ffff:127.0.0.1]:8750"),
                "01",
                1000,
                15,
            )],
        );
        assert_eq!(
            uid_in(&[&tcp, &tcp6], addr("127.0.0.1:40002"), server),
            Ok(1000)
        );
    }

    /// Every doubt refuses: nothing found, a socket no process holds (a
    /// `TIME_WAIT` remnant prints uid 0, which would read as root), two
    /// different rows, a line or header out of shape, no table at all.
    #[test]
    fn whatever_is_not_one_live_socket_is_no_owner() {
        let dir = tempfile::tempdir().unwrap();
        let (client, server) = (addr("127.0.0.1:40000"), addr("127.0.0.1:8750"));
        let empty = table(dir.path(), "empty", &[]);
        assert!(matches!(
            uid_in(&[&empty], client, server),
            Err(PeerUidError::NotFound { .. })
        ));
        let remnant = table(dir.path(), "remnant", &[&row(client, server, "06", 0, 0)]);
        assert!(matches!(
            uid_in(&[&remnant], client, server),
            Err(PeerUidError::Gone { .. })
        ));
        let closed = table(dir.path(), "closed", &[&row(client, server, "04", 0, 0)]);
        assert!(matches!(
            uid_in(&[&closed], client, server),
            Err(PeerUidError::Gone { .. })
        ));
        let two = table(
            dir.path(),
            "two",
            &[
                &row(client, server, "01", 0, 14),
                &row(client, server, "01", 1000, 15),
            ],
        );
        assert!(matches!(
            uid_in(&[&two], client, server),
            Err(PeerUidError::Ambiguous { .. })
        ));
        let repeated = row(client, server, "01", 1000, 14);
        let twice = table(dir.path(), "twice", &[&repeated, &repeated]);
        assert_eq!(uid_in(&[&twice], client, server), Ok(1000));
        for bad in [
            repeated.replace(" 1000 ", " -1 "),
            repeated.replace("   3:", "   3"),
            repeated.replace(" 01 ", " 1 "),
            repeated
                .split_whitespace()
                .take(9)
                .collect::<Vec<_>>()
                .join(" "),
        ] {
            let path = table(dir.path(), "bad", &[&bad]);
            assert!(
                matches!(
                    uid_in(&[&path], client, server),
                    Err(PeerUidError::Malformed { line: 2, .. })
                ),
                "{bad}"
            );
        }
        let headless = dir.path().join("headless");
        std::fs::write(&headless, format!("{repeated}\n")).unwrap();
        assert!(matches!(
            uid_in(&[&headless], client, server),
            Err(PeerUidError::Malformed { line: 1, .. })
        ));
        assert!(matches!(
            uid_in(&[&dir.path().join("absent")], client, server),
            Err(PeerUidError::Unreadable { .. })
        ));
    }

    /// The real tables: a connection this test makes is its own uid's.
    #[test]
    fn a_real_loopback_connection_is_the_test_processs() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(ours).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(uid_of(peer, ours), Ok(rustix::process::geteuid().as_raw()));
        let socket = PeerSocket::new(peer, Some(ours));
        assert_eq!(socket.uid(), Ok(rustix::process::geteuid().as_raw()));
        assert!(matches!(
            PeerSocket::new(peer, None).uid(),
            Err(PeerUidError::NoServerAddress)
        ));
    }
}
