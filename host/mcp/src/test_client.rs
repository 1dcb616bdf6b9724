//! An in-memory MCP client for the server's tests: `serve` on duplex pipes,
//! one JSON line at a time, every read with a deadline.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

use super::{Backend, serve};

pub(crate) struct Client {
    pub to_server: Option<DuplexStream>,
    pub from_server: Lines<BufReader<DuplexStream>>,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Client {
    pub(crate) fn start<B: Backend>(backend: Arc<B>) -> Client {
        let (client_w, server_r) = tokio::io::duplex(64 * 1024);
        let (server_w, client_r) = tokio::io::duplex(64 * 1024);
        let server = tokio::spawn(serve(BufReader::new(server_r), server_w, backend));
        Client {
            to_server: Some(client_w),
            from_server: BufReader::new(client_r).lines(),
            server,
        }
    }

    pub(crate) async fn send(&mut self, v: Value) {
        let w = self.to_server.as_mut().unwrap();
        w.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    }

    pub(crate) async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.from_server.next_line())
            .await
            .expect("the server answers")
            .unwrap()
            .expect("a line");
        serde_json::from_str(&line).unwrap()
    }

    /// A request with `id`, and the next line (its response, in these tests).
    pub(crate) async fn ask(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await;
        self.recv().await
    }

    /// Close the client's side and wait for the server to end; the lines it
    /// sent after that.
    pub(crate) async fn finish(mut self) -> Vec<Value> {
        self.to_server.take();
        self.server.await.unwrap().unwrap();
        let mut rest = Vec::new();
        while let Ok(Some(line)) = self.from_server.next_line().await {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        rest
    }
}
