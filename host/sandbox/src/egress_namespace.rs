//! The network a confined call with network sits in: a namespace of the
//! host's own with nothing but loopback, where only the egress proxy
//! listens.
//!
//! Landlock confines TCP by port only: a module allowed to connect to the
//! proxy's port could connect to that port on any machine, which is an
//! exfiltration channel to whoever listens there. So the processes of
//! network calls do not share the host's network at all. The host makes one
//! network namespace when a call first needs it (an `unshare` on a thread of
//! its own, which leaves every other thread where it was), brings its
//! loopback up, and opens the proxy's listening socket inside it; a
//! socket stays in the namespace it was made in, so the proxy, accepting on
//! the host's runtime, serves connections from there while its own
//! connections go out through the host's network. The spawner threads of
//! network calls join the namespace before they take anything else
//! (`spawner::carry`), and every child they clone is born in it.
//!
//! Inside, a connection to any other address fails (no route), the
//! operator's loopback services are not there (the namespace's loopback is
//! its own), and landlock leaves only the proxy's port: a module's one way
//! out is the proxy, which checks every name and address against the call's
//! grant.
//!
//! Design decisions:
//!
//! - **One namespace per host process, not per call.** Making and tearing
//!   down a network namespace costs the kernel milliseconds (its teardown
//!   waits for an RCU grace period); calls share one, and landlock keeps
//!   them from each other's sockets (bind is denied, connect only to the
//!   proxy's port).
//! - **Root only.** `unshare(CLONE_NEWNET)` needs `CAP_SYS_ADMIN`; a user
//!   namespace would lift that for an unprivileged host, but cannot be made
//!   from a process with threads. Without the namespace the proxy listens
//!   on the host's loopback and the part is reported not enforced
//!   (`Part::Egress`), which `confinement = "required"` refuses.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// The proxy's listening socket, and where it is.
#[derive(Debug)]
pub struct EgressListener {
    /// Bound to an ephemeral port of 127.0.0.1, listening.
    pub listener: TcpListener,
    /// Whether it is inside the egress namespace (else on the host's
    /// loopback: a call's process then shares the host's network).
    pub isolated: bool,
}

/// The namespace, made on first use; `Err` says why there is none.
pub(crate) fn namespace() -> Result<&'static OwnedFd, &'static str> {
    static NAMESPACE: OnceLock<Result<OwnedFd, &'static str>> = OnceLock::new();
    NAMESPACE
        .get_or_init(|| on_own_thread(make_namespace).unwrap_or(Err("no thread")))
        .as_ref()
        .map_err(|e| *e)
}

/// A listening socket for the egress proxy: inside the egress namespace
/// when the host can make one, else on the host's loopback.
///
/// A socket belongs to the namespace of the thread that created it, so the
/// sockets are made by one thread of the host that sits in the namespace
/// for life and does nothing else (one hop per call, not a thread).
pub fn egress_listener() -> io::Result<EgressListener> {
    if namespace().is_err() {
        return Ok(EgressListener {
            listener: TcpListener::bind(("127.0.0.1", 0))?,
            isolated: false,
        });
    }
    let (answer, answered) = std::sync::mpsc::sync_channel(1);
    binder()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(answer)
        .map_err(|_| io::Error::other("the host's egress binder thread is gone"))?;
    let listener = answered
        .recv()
        .map_err(|_| io::Error::other("the host's egress binder thread is gone"))??;
    Ok(EgressListener {
        listener,
        isolated: true,
    })
}

type BindAnswer = std::sync::mpsc::SyncSender<io::Result<TcpListener>>;

/// The thread that makes listening sockets inside the namespace.
fn binder() -> &'static std::sync::Mutex<std::sync::mpsc::Sender<BindAnswer>> {
    static BINDER: OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<BindAnswer>>> =
        OnceLock::new();
    BINDER.get_or_init(|| {
        let (requests, incoming) = std::sync::mpsc::channel::<BindAnswer>();
        let started = std::thread::Builder::new()
            .name("modhost-netns".into())
            .spawn(move || {
                let joined = namespace()
                    .map_err(io::Error::other)
                    .and_then(|ns| join(ns.as_raw_fd()));
                for answer in incoming {
                    let listener = match &joined {
                        Ok(()) => TcpListener::bind(("127.0.0.1", 0)),
                        Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                    };
                    let _ = answer.send(listener);
                }
            });
        // Without the thread, every request fails with "gone" (the
        // receiver was dropped with the closure).
        drop(started);
        std::sync::Mutex::new(requests)
    })
}

/// Move the calling thread into the egress namespace. Only for a thread
/// that starts nothing but network calls' modules (`spawner`): it stays
/// there for life.
pub(crate) fn enter() -> bool {
    namespace().is_ok_and(|ns| join(ns.as_raw_fd()).is_ok())
}

/// Run `work` on a thread of its own (a namespace change is the thread's
/// and dies with it), and wait for its answer.
fn on_own_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    std::thread::Builder::new()
        .name("modhost-netns".into())
        .spawn(work)
        .ok()?
        .join()
        .ok()
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn make_namespace() -> Result<OwnedFd, &'static str> {
    use std::os::fd::FromRawFd;
    // SAFETY: unshare with a flag, on this thread only (a network namespace
    // is per thread); it touches no memory of ours.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(
            "the host cannot make a network namespace (unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN)",
        );
    }
    let path = c"/proc/thread-self/ns/net";
    // SAFETY: open of a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err("the host made a network namespace but cannot open /proc/thread-self/ns/net");
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let ns = unsafe { OwnedFd::from_raw_fd(fd) };
    loopback_up().map_err(|_| "the host cannot bring up loopback in its network namespace")?;
    Ok(ns)
}

/// `ip link set lo up` in the calling thread's namespace.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn loopback_up() -> io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket with integer arguments; owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: a zeroed ifreq is a valid value of the C struct.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we own.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn join(fd: std::os::fd::RawFd) -> io::Result<()> {
    // SAFETY: setns on a namespace descriptor we keep open for the host's
    // life; it changes only the calling thread.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn make_namespace() -> Result<OwnedFd, &'static str> {
    Err("network namespaces are Linux only")
}

#[cfg(not(target_os = "linux"))]
fn join(_fd: std::os::fd::RawFd) -> io::Result<()> {
    Err(io::Error::other("network namespaces are Linux only"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The listener is not reachable from the host's network: a connection
    /// to its port on the host's loopback finds nothing (or something
    /// else), and one made from inside the namespace is accepted.
    #[test]
    fn the_proxy_socket_lives_in_a_network_of_its_own() {
        let egress = egress_listener().unwrap();
        assert!(
            egress.isolated,
            "a root host must make the egress namespace: {:?}",
            namespace().err()
        );
        let port = egress.listener.local_addr().unwrap().port();
        egress.listener.set_nonblocking(true).unwrap();
        // From the host's network: not this listener.
        let _ = std::net::TcpStream::connect(("127.0.0.1", port));
        assert!(
            egress.listener.accept().is_err(),
            "a connection from the host's network reached the namespace's listener"
        );
        // From inside: accepted.
        let fd = namespace().unwrap().as_raw_fd();
        let inside = on_own_thread(move || {
            join(fd).unwrap();
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert_eq!(inside, Some(true));
        egress.listener.set_nonblocking(false).unwrap();
        assert!(egress.listener.accept().is_ok());
    }

    /// Inside the namespace there is no route anywhere but loopback, and the
    /// host's loopback services are not there.
    #[test]
    fn inside_the_namespace_nothing_but_loopback_answers() {
        let host_service = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let host_port = host_service.local_addr().unwrap().port();
        host_service.set_nonblocking(true).unwrap();
        let fd = namespace().unwrap().as_raw_fd();
        let (outside, loopback) = on_own_thread(move || {
            join(fd).unwrap();
            let outside = std::net::TcpStream::connect_timeout(
                &"198.51.100.1:80".parse().unwrap(),
                std::time::Duration::from_secs(2),
            );
            let loopback = std::net::TcpStream::connect(("127.0.0.1", host_port));
            (outside.map(|_| ()), loopback.map(|_| ()))
        })
        .unwrap();
        assert_eq!(
            outside.unwrap_err().raw_os_error(),
            Some(libc::ENETUNREACH),
            "an address outside the namespace must have no route"
        );
        assert!(loopback.is_err(), "the host's loopback service was reached");
        assert!(host_service.accept().is_err());
    }
}
