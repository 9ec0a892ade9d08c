//! The values a flag takes, told to clap so that shell completions offer
//! them: the operations for `--op`, the property types for `--type`, the
//! engines for `--engine`.

use std::ffi::OsStr;
use std::marker::PhantomData;
use std::str::FromStr;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use mfstream_model::ops::{Arg, Kind, Op};

/// Parses a `T` with its `FromStr` (so in any case, with its own error
/// message) and offers `names()` to completions. Unlike clap's
/// `PossibleValuesParser`, it leaves the checking to `T`.
#[derive(Clone)]
pub(super) struct Named<T> {
    names: fn() -> Vec<&'static str>,
    parsed: PhantomData<fn() -> T>,
}

/// A [`Named`] parser of `T` offering `names()`.
pub(super) fn names<T>(names: fn() -> Vec<&'static str>) -> Named<T> {
    Named {
        names,
        parsed: PhantomData,
    }
}

impl<T> TypedValueParser for Named<T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Display,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg
            .and_then(clap::Arg::get_long)
            .map_or_else(|| "the value".to_owned(), |long| format!("--{long}"));
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(
                ErrorKind::InvalidUtf8,
                format!("{flag} is not UTF-8: {value:?}\n"),
            )
            .with_cmd(cmd)
        })?;
        text.parse().map_err(|e| {
            clap::Error::raw(ErrorKind::InvalidValue, format!("{flag}: {e}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new((self.names)().into_iter().map(PossibleValue::new)))
    }
}

/// The catalogue's operations' names, for `--op`: on numbers and on
/// positions.
pub(super) fn operations() -> Vec<&'static str> {
    Op::ALL.iter().map(|op| op.name()).collect()
}

/// `--op`'s help: the catalogue's operations on numbers, each with `<x>`
/// when it takes an argument, then those on positions; one that takes a
/// geometry needs `--query`, where the geometry goes.
pub(super) fn operations_help() -> String {
    let (plain, geometry): (Vec<Op>, Vec<Op>) =
        Op::on(Kind::Position).partition(|op| op.entry().arg != Arg::Geometry);
    let names = |ops: Vec<Op>| {
        ops.iter()
            .map(|op| op.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "A lifted operation, in any case: {}; on positions (--type TGeogPoint or TGeomPoint): \
         {} ({} and geofences take --query)",
        Op::catalogue_of(Kind::Number),
        names(plain),
        names(geometry)
    )
}

/// `--arg`'s help: the operations that take an argument.
pub(super) fn arg_help() -> String {
    let ops: Vec<&str> = Op::ALL
        .iter()
        .filter(|op| op.takes_arg())
        .map(|op| op.name())
        .collect();
    format!("The operation's scalar argument ({})", ops.join(", "))
}

/// The property types' names, for `--type`.
pub(super) fn property_types() -> Vec<&'static str> {
    mfstream_model::PropertyType::ALL
        .iter()
        .map(|t| t.as_str())
        .collect()
}
