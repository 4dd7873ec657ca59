//! A loopback TCP echo server run inside the benchmark process: the floor
//! under any request/reply latency on this machine.
//!
//! Whatever a server adds over the echo of the same bytes is its own cost
//! (parse, execute, reply); the rest is the kernel's loopback path, the
//! syscalls and the scheduler, which no server can beat. The echo thread
//! serves one connection at a time, which is all a one-op-in-flight client
//! needs.
//!
//! Invariant: dropping [`EchoServer`] stops its thread (the accept loop is
//! woken by a connection to itself and sees the stop flag).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct EchoServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EchoServer {
    /// Binds 127.0.0.1 on an ephemeral port and starts echoing.
    pub fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("echo-floor".into())
            .spawn(move || accept_loop(listener, flag))?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept; if that fails the thread is already gone.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: TcpListener, stop: Arc<AtomicBool>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(conn) = conn {
            // An echo connection ends when its client goes away; errors on
            // it only end that connection.
            let _ = echo(conn);
        }
    }
}

fn echo(mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        conn.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_and_stops_on_drop() {
        let server = EchoServer::start().unwrap();
        let mut c = TcpStream::connect(server.addr()).unwrap();
        c.write_all(b"ping").unwrap();
        let mut back = [0u8; 4];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"ping");
        drop(c);
        drop(server); // must not hang
    }
}
