//! STREAM.INFO's `deleted_details` as nats-server 2.9.10 answers it: with it, the state lists
//! the deleted sequences after `num_deleted`; without it, only the count.

mod common;

use common::js_api as api;

#[tokio::test]
async fn deleted_details_lists_the_deleted_sequences() {
    let (srv, nc, dir) = common::start_js("info-deleted").await;
    for storage in ["file", "memory"] {
        let name = format!("D{storage}");
        let subject = format!("d.{storage}");
        let c = api(
            &nc,
            &format!("$JS.API.STREAM.CREATE.{name}"),
            &format!(r#"{{"name":"{name}","subjects":["{subject}"],"storage":"{storage}"}}"#),
        )
        .await;
        assert!(c.get("error").is_none(), "{c}");
        for _ in 0..7 {
            let a = api(&nc, &subject, "x").await;
            assert!(a.get("seq").is_some(), "{a}");
        }
        for seq in [2, 4, 5] {
            let d = api(
                &nc,
                &format!("$JS.API.STREAM.MSG.DELETE.{name}"),
                &format!(r#"{{"seq":{seq}}}"#),
            )
            .await;
            assert_eq!(d["success"], true, "{d}");
        }
        let info = api(
            &nc,
            &format!("$JS.API.STREAM.INFO.{name}"),
            r#"{"deleted_details":true}"#,
        )
        .await;
        assert_eq!(info["state"]["num_deleted"], 3, "{info}");
        assert_eq!(
            info["state"]["deleted"],
            serde_json::json!([2, 4, 5]),
            "{info}"
        );
        let plain = api(&nc, &format!("$JS.API.STREAM.INFO.{name}"), "").await;
        assert_eq!(plain["state"]["num_deleted"], 3);
        assert!(plain["state"].get("deleted").is_none(), "{plain}");
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
