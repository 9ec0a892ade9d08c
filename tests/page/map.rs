//! The map of a feature's positions on the page: what the server tells it
//! (a position query's reference system and geometry).

use crate::serve::{Serve, register};

/// The positions of ship s1.
const S: &str = "/collections/ships/items/s1/tgsequence";

/// A square fence, lon 2.811..2.831, lat 51.2..51.22 (README's walk-through).
const FENCE: &str = r#"{"type":"Polygon","coordinates":[[[2.811,51.2],[2.831,51.2],[2.831,51.22],[2.811,51.22],[2.811,51.2]]]}"#;

#[tokio::test]
async fn a_position_querys_link_gives_its_crs_and_the_geometry_the_map_draws() {
    let server = Serve::start("map-link", &[], &[]);
    let mut client = server.client();
    let fence = register(&mut client, S, &format!(r#"{{"geofence":{FENCE}}}"#)).await;
    let track = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let fence_link = client.get(&fence).await.json();
    assert_eq!(fence_link["crs"], "EPSG:4326");
    let want: serde_json::Value = serde_json::from_str(FENCE).unwrap();
    assert_eq!(fence_link["geometry"], want);
    let track_link = client.get(&track).await.json();
    assert_eq!(track_link["crs"], "EPSG:4326");
    assert!(track_link.get("geometry").is_none(), "{track_link}");
    // A list leaves the geometries out (up to 1 MiB each), not the crs.
    let list = client.get(&format!("{S}/queries")).await.json();
    let queries = list["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 2);
    for q in queries {
        assert_eq!(q["crs"], "EPSG:4326", "{q}");
        assert!(q.get("geometry").is_none(), "{q}");
    }
    // A property's query has neither.
    let speed = register(
        &mut client,
        "/collections/ships/items/s1/tproperties/speed",
        r#"{"operation":"abs"}"#,
    )
    .await;
    let link = client.get(&speed).await.json();
    assert!(
        link.get("crs").is_none() && link.get("geometry").is_none(),
        "{link}"
    );
}
