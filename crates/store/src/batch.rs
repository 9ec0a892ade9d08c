//! The store's batches: the instants of one ingest call, and the result
//! events of one store call, each encoded as the payload of one journal
//! record, so that logging costs one record per call, not per instant or
//! event.
//!
//! An event is its kind and its JSON data, each a `u32` length and UTF-8
//! bytes; its id is the row's first id plus its place in the row.
//!
//! Each instant is its datetime (a `u32` length and UTF-8 bytes, little
//! endian), a tag, and the value: a number's exact `f64` bits (so `-0` and
//! every last bit come back as they went in), a text's length and bytes,
//! or nothing for a boolean (its tag says which). Decoding checks every
//! length against what is left, so a damaged row is an error, never a
//! panic or a read past its end.

use super::frame::{DecodeError, put_str, take, take_array, take_bytes, take_str};
use super::record::StoredEvent;
use mfstream_model::{EventKind, Instant, Point, Value};

/// The bytes an event takes in a batch beyond its kind and data.
#[cfg(test)]
pub(crate) const EVENT_OVERHEAD: usize = 8;

/// Decodes a batch of events whose first has the id `first_id`.
pub(crate) fn decode_events(
    mut data: &[u8],
    first_id: u64,
    mut each: impl FnMut(StoredEvent),
) -> Result<(), DecodeError> {
    let mut id = first_id;
    while !data.is_empty() {
        let name = take_str(&mut data)?;
        let Some(kind) = EventKind::from_name(&name) else {
            return Err(DecodeError::UnknownEventKind(name));
        };
        let data_ = take_str(&mut data)?;
        each(StoredEvent {
            id,
            kind,
            data: data_,
        });
        id += 1;
    }
    Ok(())
}

const NUMBER: u8 = 0;
const TEXT: u8 = 1;
const FALSE: u8 = 2;
const TRUE: u8 = 3;
/// A position: x and y as exact `f64` bits, a byte saying whether a z
/// follows, then z's bits. (Tags 0 to 3 are unchanged: a state directory
/// written before positions came opens as it did.)
const POINT: u8 = 4;
/// An extent (a window's result; the store refuses one as an instant's
/// value, but every value has its encoding): its four `f64`s' bits.
const BBOX: u8 = 5;

/// Appends `instants` to `out`.
pub(crate) fn encode(instants: &[Instant], out: &mut Vec<u8>) {
    for instant in instants {
        put_str(&instant.datetime, out);
        match &instant.value {
            Value::Number(v) => {
                out.push(NUMBER);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Value::Text(s) => {
                out.push(TEXT);
                put_str(s, out);
            }
            Value::Bool(false) => out.push(FALSE),
            Value::Bool(true) => out.push(TRUE),
            Value::Point(p) => {
                out.push(POINT);
                out.extend_from_slice(&p.x.to_bits().to_le_bytes());
                out.extend_from_slice(&p.y.to_bits().to_le_bytes());
                match p.z() {
                    Some(z) => {
                        out.push(1);
                        out.extend_from_slice(&z.to_bits().to_le_bytes());
                    }
                    None => out.push(0),
                }
            }
            Value::BBox(b) => {
                out.push(BBOX);
                for v in b.iter() {
                    out.extend_from_slice(&v.to_bits().to_le_bytes());
                }
            }
        }
    }
}

/// Decodes a batch, calling `each` with every instant in order.
pub(crate) fn decode(mut data: &[u8], mut each: impl FnMut(Instant)) -> Result<(), DecodeError> {
    while !data.is_empty() {
        let datetime = take_str(&mut data)?;
        let value = match take(&mut data, 1)?[0] {
            NUMBER => Value::Number(take_f64(&mut data)?),
            TEXT => Value::Text(take_str(&mut data)?),
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            POINT => {
                let x = take_f64(&mut data)?;
                let y = take_f64(&mut data)?;
                let z = match take(&mut data, 1)?[0] {
                    0 => None,
                    1 => Some(take_f64(&mut data)?),
                    tag => {
                        return Err(DecodeError::UnknownTag {
                            what: "position z flag",
                            tag,
                        });
                    }
                };
                Value::Point(Point::with_z(x, y, z))
            }
            BBOX => Value::BBox(Box::new([
                take_f64(&mut data)?,
                take_f64(&mut data)?,
                take_f64(&mut data)?,
                take_f64(&mut data)?,
            ])),
            tag => {
                return Err(DecodeError::UnknownTag {
                    what: "value tag",
                    tag,
                });
            }
        };
        each(Instant { datetime, value });
    }
    Ok(())
}

/// Takes one `f64` as its exact bits.
fn take_f64(data: &mut &[u8]) -> Result<f64, DecodeError> {
    Ok(f64::from_bits(u64::from_le_bytes(take_array::<8>(data)?)))
}

/// The number of instants in a batch, read without decoding them (no
/// allocation): an error when the batch is damaged.
pub(crate) fn count_instants(mut data: &[u8]) -> Result<u64, DecodeError> {
    let mut n = 0;
    while !data.is_empty() {
        take_bytes(&mut data)?;
        match take(&mut data, 1)?[0] {
            NUMBER => drop(take(&mut data, 8)?),
            TEXT => drop(take_bytes(&mut data)?),
            FALSE | TRUE => {}
            POINT => {
                take(&mut data, 16)?;
                match take(&mut data, 1)?[0] {
                    0 => {}
                    1 => drop(take(&mut data, 8)?),
                    tag => {
                        return Err(DecodeError::UnknownTag {
                            what: "position z flag",
                            tag,
                        });
                    }
                }
            }
            BBOX => drop(take(&mut data, 32)?),
            tag => {
                return Err(DecodeError::UnknownTag {
                    what: "value tag",
                    tag,
                });
            }
        }
        n += 1;
    }
    Ok(n)
}

/// The number of events in a batch and the bytes of their kinds and data,
/// read without decoding them.
pub(crate) fn count_events(mut data: &[u8]) -> Result<(u64, u64), DecodeError> {
    let (mut n, mut bytes) = (0, 0);
    while !data.is_empty() {
        bytes += take_bytes(&mut data)?.len() as u64;
        bytes += take_bytes(&mut data)?.len() as u64;
        n += 1;
    }
    Ok((n, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_round_trips_bit_for_bit() {
        let instants = vec![
            Instant::number("t1", -0.0),
            Instant::number("t2", 0.1 + 0.2),
            Instant {
                datetime: "2026-01-01T00:00:00Z".into(),
                value: Value::Text("ahead \u{1F6A2}".into()),
            },
            Instant {
                datetime: String::new(),
                value: Value::Bool(true),
            },
            Instant {
                datetime: "t".into(),
                value: Value::Bool(false),
            },
            Instant {
                datetime: "p".into(),
                value: Value::Point(Point::new(-179.99999999999997, 0.1 + 0.2)),
            },
            Instant {
                datetime: "z".into(),
                value: Value::Point(Point::with_z(1.0, -0.0, Some(12.5))),
            },
            Instant {
                datetime: "b".into(),
                value: Value::BBox(Box::new([1.0, -2.0, 3.5, 4.0])),
            },
        ];
        let mut data = Vec::new();
        encode(&instants, &mut data);
        assert_eq!(count_instants(&data), Ok(instants.len() as u64));
        let mut back = Vec::new();
        decode(&data, |i| back.push(i)).unwrap();
        assert_eq!(back, instants);
        // A damaged position (cut inside its z) is an error, not a panic.
        let cut = &data[..data.len() - 3];
        assert!(decode(cut, |_| {}).is_err());
        assert!(count_instants(cut).is_err());
        let Value::Number(zero) = back[0].value else {
            panic!("a number")
        };
        assert!(zero.is_sign_negative());
    }

    #[test]
    fn events_round_trip_with_their_ids_from_the_first() {
        let events = vec![
            StoredEvent {
                id: 7,
                kind: EventKind::Instant,
                data: "{\"value\":1}".into(),
            },
            StoredEvent {
                id: 8,
                kind: EventKind::Window,
                data: String::new(),
            },
        ];
        let mut batch = super::super::record::EventBatch::new(7);
        for e in &events {
            batch.push(e.kind, e.data.as_bytes());
        }
        let data = batch.data().to_vec();
        assert_eq!(
            data.len(),
            events
                .iter()
                .map(|e| e.size() + EVENT_OVERHEAD)
                .sum::<usize>()
        );
        let mut back = Vec::new();
        decode_events(&data, 7, |e| back.push(e)).unwrap();
        assert_eq!(back, events);
        assert!(decode_events(&data[..data.len() - 1], 7, |_| {}).is_err());
    }

    #[test]
    fn an_event_of_an_unknown_kind_is_an_error() {
        let mut data = Vec::new();
        super::super::frame::put_bytes(b"tick", &mut data);
        super::super::frame::put_bytes(b"{}", &mut data);
        let err = decode_events(&data, 1, |_| {}).unwrap_err();
        assert_eq!(err, DecodeError::UnknownEventKind("tick".into()));
        assert!(err.to_string().contains("\"tick\""), "{err}");
    }

    #[test]
    fn a_truncated_or_damaged_batch_is_an_error() {
        let mut data = Vec::new();
        encode(&[Instant::number("t", 1.0)], &mut data);
        for cut in 0..data.len() {
            let mut n = 0;
            let result = decode(&data[..cut], |_| n += 1);
            assert!(cut == 0 || result.is_err(), "cut at {cut}");
        }
        data[5] = 9;
        let err = decode(&data, |_| {}).unwrap_err();
        assert_eq!(
            err,
            DecodeError::UnknownTag {
                what: "value tag",
                tag: 9
            }
        );
        assert!(err.to_string().contains("tag 9"), "{err}");
    }
}
