//! A real SMTP server on 127.0.0.1:0 for the payer e-mail test: it speaks enough of RFC 5321
//! (EHLO/HELO, MAIL, RCPT, DATA with dot-unstuffing, RSET, NOOP, QUIT) for an SMTP client to
//! deliver to it over plain TCP, and keeps every message it accepted.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The DATA, headers and body, as sent.
    pub data: String,
}

pub struct SmtpSink {
    pub port: u16,
    mails: Arc<Mutex<Vec<Mail>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mails: Arc<Mutex<Vec<Mail>>> = Arc::default();
        let kept = mails.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let _ = session(conn, kept).await;
                });
            }
        });
        SmtpSink { port, mails, task }
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }
}

fn path(arg: &str) -> String {
    arg.split_once(':').map_or(arg, |(_, p)| p).trim().trim_start_matches('<').split('>').next().unwrap_or("").into()
}

async fn session(conn: tokio::net::TcpStream, kept: Arc<Mutex<Vec<Mail>>>) -> std::io::Result<()> {
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    write.write_all(b"220 sink ESMTP ready\r\n").await?;
    let (mut from, mut to) = (String::new(), Vec::new());
    while let Some(line) = lines.next_line().await? {
        let upper = line.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") {
            b"250-sink greets you\r\n250 8BITMIME\r\n"
        } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
            b"250 OK\r\n"
        } else if upper.starts_with("RSET") {
            (from, to) = (String::new(), Vec::new());
            b"250 OK\r\n"
        } else if upper.starts_with("MAIL FROM") {
            from = path(&line);
            b"250 OK\r\n"
        } else if upper.starts_with("RCPT TO") {
            to.push(path(&line));
            b"250 OK\r\n"
        } else if upper == "DATA" {
            write.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await?;
            let mut data = String::new();
            while let Some(l) = lines.next_line().await? {
                if l == "." {
                    break;
                }
                data.push_str(l.strip_prefix('.').unwrap_or(&l));
                data.push_str("\r\n");
            }
            kept.lock().unwrap().push(Mail { from: std::mem::take(&mut from), to: std::mem::take(&mut to), data });
            b"250 OK queued\r\n"
        } else if upper.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            b"502 command not implemented\r\n"
        };
        write.write_all(reply).await?;
    }
    Ok(())
}
