//! Send a request and print the reply (see `reply.rs` for the other side).
//!
//! ```text
//! cargo run -- -p 4222                                      # a server, in one terminal
//! cargo run --example reply -- time.now                     # a responder, in another
//! cargo run --example request -- time.now "what time is it?"
//! ```
//!
//! With nobody listening on the subject the server answers at once with "no responders".
//! The server URL comes from `NATS_URL` (default `nats://127.0.0.1:4222`).

use std::error::Error;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let Some(subject) = args.next() else {
        eprintln!("usage: request <subject> [message]");
        std::process::exit(2);
    };
    let message = args.next().unwrap_or_default();
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());

    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(Duration::from_secs(5)))
        .connect(&url)
        .await?;
    match client.request(subject.clone(), message.into()).await {
        Ok(reply) => {
            println!("{}", String::from_utf8_lossy(&reply.payload));
            Ok(())
        }
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
            eprintln!("no responders on {subject:?}");
            std::process::exit(1);
        }
        Err(e) => Err(e.into()),
    }
}
