//! Whole numbers as JSON writes them: `30` or `30.0`. JSON has one number type, and a client
//! built on doubles sends the second; both mean 30. A fraction or a negative number is refused;
//! a number past the type's range saturates (a limit that large is no limit).

use serde::{Deserialize, Deserializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Whole(u64),
    Float(f64),
}

/// An optional `u64` written either way.
pub fn optional_u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<Written>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Written::Whole(number)) => Ok(Some(number)),
        // `as` saturates: 1e30 is u64::MAX.
        Some(Written::Float(number)) if number >= 0.0 && number.fract() == 0.0 => {
            Ok(Some(number as u64))
        }
        Some(Written::Float(number)) => Err(serde::de::Error::custom(format!(
            "expected a whole number of at least 0, not {number}"
        ))),
    }
}

/// An optional `u32` written either way.
pub fn optional_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    Ok(optional_u64(deserializer)?.map(|number| u32::try_from(number).unwrap_or(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Limits {
        #[serde(default, deserialize_with = "super::optional_u64")]
        wide: Option<u64>,
        #[serde(default, deserialize_with = "super::optional_u32")]
        narrow: Option<u32>,
    }

    fn read(json: serde_json::Value) -> Result<(Option<u64>, Option<u32>), serde_json::Error> {
        serde_json::from_value::<Limits>(json).map(|limits| (limits.wide, limits.narrow))
    }

    #[test]
    fn a_whole_number_is_taken_written_either_way_and_saturates() {
        assert_eq!(read(json!({})).unwrap(), (None, None));
        assert_eq!(read(json!({"wide": null})).unwrap(), (None, None));
        assert_eq!(
            read(json!({"wide": 30, "narrow": 2361.0})).unwrap(),
            (Some(30), Some(2361))
        );
        assert_eq!(
            read(json!({"wide": 1e30, "narrow": 5_000_000_000u64})).unwrap(),
            (Some(u64::MAX), Some(u32::MAX))
        );
        for bad in [
            json!({"wide": 1.5}),
            json!({"narrow": -2}),
            json!({"wide": "30"}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }
}
