//! While a node loads its copies from disk (local persistence) it does not
//! serve yet: clients that connect meanwhile are answered
//! `-LOADING Redis is loading the dataset in memory`, as Redis answers
//! while it loads its AOF or RDB file, and the connection is closed
//! (clients retry on LOADING).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const REPLY: &[u8] = b"-LOADING Redis is loading the dataset in memory\r\n";

/// Answers the client port's connections with LOADING until [`Loading::done`].
pub struct Loading {
    stop: oneshot::Sender<()>,
    task: JoinHandle<TcpListener>,
}

impl Loading {
    pub fn answer(listener: TcpListener) -> Loading {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => return listener,
                    accepted = listener.accept() => {
                        if let Ok((mut stream, _)) = accepted {
                            tokio::spawn(async move {
                                let mut buf = [0u8; 1024];
                                let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf));
                                if let Ok(Ok(n)) = read.await {
                                    if n > 0 {
                                        let _ = stream.write_all(REPLY).await;
                                    }
                                }
                            });
                        }
                    }
                }
            }
        });
        Loading { stop, task }
    }

    /// Stops answering; the listener, for the node to serve on.
    pub async fn done(self) -> std::io::Result<TcpListener> {
        let _ = self.stop.send(());
        self.task.await.map_err(std::io::Error::other)
    }
}
