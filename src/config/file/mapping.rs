//! `mappings {}` (alias `maps`), at the top level or in an account: `src: dest`,
//! `src: { destination, weight, cluster }` or `src: [ { … }, … ]`, checked as nats-server's
//! `parseAccountMappings` checks them (its texts). The keys are subjects, kept as written.

use super::{map, ConfigError, Kind, Value};
use crate::mapping::{MapDest, MappingConfig, Mappings};

pub(super) fn mappings(v: &Value) -> Result<Vec<MappingConfig>, ConfigError> {
    let m = map("mappings", v)?;
    let mut out = Vec::new();
    for e in m.entries.iter().filter(|e| !e.used_as_variable) {
        let src = e.key.clone();
        if !crate::subject::is_valid_subject(src.as_bytes()) {
            return Err(ConfigError::at(
                &e.key_pos,
                format!("Subject {src:?} is not a valid subject"),
            ));
        }
        let (c, simple) = match &e.value.kind {
            Kind::String(dest) => (MappingConfig::simple(&src, dest), Some(dest.clone())),
            Kind::Array(items) => {
                let dests = items.iter().map(map_dest).collect::<Result<_, _>>()?;
                (MappingConfig { src, dests }, None)
            }
            Kind::Map(_) => {
                let dests = vec![map_dest(&e.value)?];
                (MappingConfig { src, dests }, None)
            }
            other => {
                return Err(ConfigError::at(
                    &e.value.pos,
                    format!("Unknown type {} for mapping destination", other.type_name()),
                ))
            }
        };
        // Compiled here only for its errors: the server compiles its own copy.
        if let Err(err) = Mappings::build(std::slice::from_ref(&c)) {
            let text = match simple {
                Some(d) => format!("Error adding mapping for {:?} to {d:?} : {err}", c.src),
                None => format!("Error adding mapping for {:?} : {err}", c.src),
            };
            return Err(ConfigError::at(&e.value.pos, text));
        }
        out.push(c);
    }
    Ok(out)
}

/// `{ destination, weight, cluster }` (nats-server's `parseAccountMapDest`).
fn map_dest(v: &Value) -> Result<MapDest, ConfigError> {
    let Kind::Map(m) = &v.kind else {
        return Err(ConfigError::at(
            &v.pos,
            "Expected an entry for the mapping destination",
        ));
    };
    let mut d = MapDest {
        subject: String::new(),
        weight: 0,
        cluster: None,
    };
    let mut weighted = false;
    for e in m.entries.iter().filter(|e| !e.used_as_variable) {
        let k = e.key.to_ascii_lowercase();
        let v = &e.value;
        match (k.as_str(), &v.kind) {
            ("dest" | "destination", Kind::String(s)) => d.subject = s.clone(),
            ("cluster", Kind::String(s)) => d.cluster = Some(s.clone()),
            ("weight", Kind::String(s)) => {
                let w = s.trim_end_matches('%');
                let n: i64 = w.parse().map_err(|_| {
                    ConfigError::at(
                        &v.pos,
                        format!("Invalid weight {w:?} for mapping destination"),
                    )
                })?;
                d.weight = weight(n, v)?;
                weighted = true;
            }
            ("weight", Kind::Integer { value, .. }) => {
                d.weight = weight(*value, v)?;
                weighted = true;
            }
            ("weight", _) => {
                return Err(ConfigError::at(
                    &v.pos,
                    "Unknown entry type for weight of mapping destination",
                ))
            }
            ("dest" | "destination" | "cluster", other) => {
                return Err(ConfigError::at(
                    &v.pos,
                    format!("{:?} should be a string, not {}", e.key, other.type_name()),
                ))
            }
            _ => {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("Unknown field {:?} for mapping destination", e.key),
                ))
            }
        }
    }
    if !weighted {
        return Err(ConfigError::at(
            &v.pos,
            format!("Missing weight for mapping destination {:?}", d.subject),
        ));
    }
    Ok(d)
}

fn weight(n: i64, v: &Value) -> Result<u8, ConfigError> {
    u8::try_from(n).ok().filter(|w| *w <= 100).ok_or_else(|| {
        ConfigError::at(
            &v.pos,
            format!("Invalid weight {n} for mapping destination"),
        )
    })
}
