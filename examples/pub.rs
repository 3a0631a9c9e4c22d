//! Publish one message (or several) to a subject.
//!
//! ```text
//! cargo run -- -p 4222                                      # a server, in one terminal
//! cargo run --example sub -- greetings                      # a subscriber, in another
//! cargo run --example pub -- greetings "hello world"        # then publish
//! cargo run --example pub -- greetings "hello" 10           # ten times
//! ```
//!
//! The server URL comes from `NATS_URL` (default `nats://127.0.0.1:4222`).

use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(subject), Some(message)) = (args.next(), args.next()) else {
        eprintln!("usage: pub <subject> <message> [count]");
        std::process::exit(2);
    };
    let count: u64 = match args.next() {
        Some(n) => n.parse()?,
        None => 1,
    };
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());

    let client = async_nats::connect(&url).await?;
    for _ in 0..count {
        client
            .publish(subject.clone(), message.clone().into())
            .await?;
    }
    // publish() only queues the message: flush before exiting so it reaches the server.
    client.flush().await?;
    println!("published {count} message(s) to {subject:?} on {url}");
    Ok(())
}
