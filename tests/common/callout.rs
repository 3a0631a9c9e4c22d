//! An auth callout service for the tests (`auth_callout.rs`, `auth_callout_operator.rs`):
//! it answers `$SYS.REQ.USER.AUTH` on a connection of the callout account, opening a
//! request the server sealed to `xkey` and sealing its answer back the same way.

use futures::StreamExt;
use nkeys::XKey;

/// Serve requests on `nc` until it closes: `answer` turns a request JWT into the response
/// JWT.
pub async fn serve<F>(nc: async_nats::Client, xkey: XKey, answer: F)
where
    F: Fn(&str) -> String + Send + 'static,
{
    let mut sub = nc.subscribe("$SYS.REQ.USER.AUTH").await.expect("subscribe");
    nc.flush().await.expect("flush");
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            let Some(reply) = m.reply.clone() else {
                continue;
            };
            let sealed_by = m
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Server-Xkey"))
                .map(|v| XKey::from_public_key(v.as_str()).expect("server xkey"));
            let token = match &sealed_by {
                Some(from) => xkey.open(&m.payload, from).expect("decrypt"),
                None => m.payload.to_vec(),
            };
            let answer = answer(&String::from_utf8(token).expect("UTF-8"));
            let body = match &sealed_by {
                Some(to) => xkey.seal(answer.as_bytes(), to).expect("seal"),
                None => answer.into_bytes(),
            };
            let _ = nc.publish(reply, body.into()).await;
            let _ = nc.flush().await;
        }
    });
}
