//! Answer requests on a subject: each reply is the request's payload with a prefix.
//!
//! ```text
//! cargo run -- -p 4222                                      # a server, in one terminal
//! cargo run --example reply -- echo                         # answer "echo: <payload>"
//! cargo run --example reply -- echo "pong: " 1              # answer once, then exit
//! cargo run --example request -- echo "hi"                  # in a third terminal
//! ```
//!
//! Responders join the queue group `responders`, so several copies share the requests.
//! The server URL comes from `NATS_URL` (default `nats://127.0.0.1:4222`).

use futures::StreamExt;
use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let Some(subject) = args.next() else {
        eprintln!("usage: reply <subject> [prefix] [max requests]");
        std::process::exit(2);
    };
    let prefix = args.next().unwrap_or_else(|| format!("{subject}: "));
    let max: Option<u64> = args.next().map(|n| n.parse()).transpose()?;
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());

    let client = async_nats::connect(&url).await?;
    let mut requests = client
        .queue_subscribe(subject.clone(), "responders".into())
        .await?;
    client.flush().await?;
    println!("replying on {subject:?} at {url}");

    let mut answered = 0u64;
    while let Some(req) = requests.next().await {
        // A message without a reply subject is not a request: nobody waits for an answer.
        let Some(reply_to) = req.reply else { continue };
        let mut body = prefix.clone().into_bytes();
        body.extend_from_slice(&req.payload);
        client.publish(reply_to, body.into()).await?;
        answered += 1;
        if max.is_some_and(|m| answered >= m) {
            break;
        }
    }
    client.flush().await?;
    Ok(())
}
