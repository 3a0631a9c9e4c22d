//! Subscribe to a subject (wildcards `*` and `>` allowed) and print what arrives.
//!
//! ```text
//! cargo run -- -p 4222                                      # a server, in one terminal
//! cargo run --example sub -- 'greetings.>'                  # print everything under greetings.
//! cargo run --example sub -- greetings workers              # join queue group "workers"
//! cargo run --example sub -- greetings "" 3                 # exit after 3 messages
//! cargo run --example pub -- greetings.en "hello"           # in a third terminal
//! ```
//!
//! The server URL comes from `NATS_URL` (default `nats://127.0.0.1:4222`).

use futures::StreamExt;
use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let Some(subject) = args.next() else {
        eprintln!("usage: sub <subject> [queue group] [max messages]");
        std::process::exit(2);
    };
    let queue = args.next().filter(|q| !q.is_empty());
    let max: Option<u64> = args.next().map(|n| n.parse()).transpose()?;
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());

    let client = async_nats::connect(&url).await?;
    let mut sub = match &queue {
        Some(q) => client.queue_subscribe(subject.clone(), q.clone()).await?,
        None => client.subscribe(subject.clone()).await?,
    };
    // Make sure the server has the subscription before saying we are listening.
    client.flush().await?;
    println!("listening on {subject:?} at {url}");

    let mut seen = 0u64;
    while let Some(msg) = sub.next().await {
        println!(
            "[{}] {}",
            msg.subject,
            String::from_utf8_lossy(&msg.payload)
        );
        seen += 1;
        if max.is_some_and(|m| seen >= m) {
            break;
        }
    }
    Ok(())
}
