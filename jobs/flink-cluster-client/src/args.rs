//! The command line: options, and the operation checked before anything is
//! submitted.

use std::path::PathBuf;
use std::time::Duration;

use mfstream_ops::{ArgError, Kind, Op};

use crate::Exit;

const USAGE: &str = "usage: mfstream-flink-client [--rest URL] --jar JAR [--listen ADDR] [--schedule-timeout SECS] OP [ARG]
  --rest URL              the cluster's REST address (else MFSTREAM_FLINK_REST), e.g. http://127.0.0.1:28081
  --jar JAR               the cluster job's jar (jobs/flink/cluster.sh builds it)
  --listen ADDR           the address the TaskManagers connect back to (else MFSTREAM_FLINK_LISTEN, else 127.0.0.1)
  --schedule-timeout SECS how long a job may wait for a free task slot (else MFSTREAM_FLINK_SCHEDULE_TIMEOUT, else 60)";

/// Exit 2 with `message` and the usage.
pub(crate) fn usage(message: String) -> Exit {
    Exit(2, format!("{message}\n{USAGE}"))
}

/// What the command line and the environment ask for.
pub(crate) struct Options {
    pub rest: String,
    /// Where `rest` came from (`--rest`, `MFSTREAM_FLINK_REST`), for errors.
    pub rest_from: &'static str,
    pub jar: PathBuf,
    pub listen: String,
    /// Where `listen` came from (`--listen`, `MFSTREAM_FLINK_LISTEN`, the
    /// default), for errors.
    pub listen_from: &'static str,
    pub schedule_timeout: Duration,
    pub op: String,
    pub arg: Option<String>,
    /// The bridge protocol the host speaks (`MFSTREAM_PROTOCOL`, 1 when unset).
    pub protocol: u32,
}

pub(crate) fn parse_args() -> Result<Options, Exit> {
    let mut args = std::env::args().skip(1);
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut rest = env("MFSTREAM_FLINK_REST").map(|r| (r, "MFSTREAM_FLINK_REST"));
    let mut jar = None;
    let mut listen = match env("MFSTREAM_FLINK_LISTEN") {
        Some(listen) => (listen, "MFSTREAM_FLINK_LISTEN"),
        None => ("127.0.0.1".to_owned(), "the default"),
    };
    let mut timeout = env("MFSTREAM_FLINK_SCHEDULE_TIMEOUT").unwrap_or_else(|| "60".to_owned());
    let mut positional = Vec::new();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match arg.as_str() {
            "--rest" => rest = Some((value("--rest")?, "--rest")),
            "--jar" => jar = Some(PathBuf::from(value("--jar")?)),
            "--listen" => listen = (value("--listen")?, "--listen"),
            "--schedule-timeout" => timeout = value("--schedule-timeout")?,
            "-h" | "--help" => return Err(Exit(0, USAGE.to_owned())),
            _ => positional.push(arg),
        }
    }
    let framing = std::env::var("MFSTREAM_FRAMING").unwrap_or_else(|_| "value".to_owned());
    if framing != "value" {
        return Err(usage(format!(
            "MFSTREAM_FRAMING must be \"value\" (this job serves the value framing only), got '{framing}'"
        )));
    }
    let (op, arg) = check_operation(&positional).map_err(usage)?;
    let (rest, rest_from) = rest.ok_or_else(|| {
        usage("no REST address: pass --rest or set MFSTREAM_FLINK_REST".to_owned())
    })?;
    let jar = jar.ok_or_else(|| usage("no job jar: pass --jar".to_owned()))?;
    let schedule_timeout = timeout
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            usage(format!(
                "the schedule timeout must be positive seconds, got '{timeout}'"
            ))
        })?;
    // A version this client does not know reads as 1: no error lines.
    let protocol = env("MFSTREAM_PROTOCOL")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    let (listen, listen_from) = listen;
    Ok(Options {
        rest,
        rest_from,
        jar,
        listen,
        listen_from,
        schedule_timeout,
        op,
        arg,
        protocol,
    })
}

/// The operation and its argument, checked before anything is submitted.
fn check_operation(args: &[String]) -> Result<(String, Option<String>), String> {
    let (op, arg) = match args {
        [op] => (op.clone(), None),
        [op, arg] => (op.clone(), Some(arg.clone())),
        _ => {
            return Err(format!(
                "expected an operation and at most one argument, got {} arguments",
                args.len()
            ));
        }
    };
    let Some(found) = Op::find(&op, Kind::Number) else {
        return Err(format!(
            "unknown operation '{op}': supported operations are {}",
            Op::catalogue_of(Kind::Number)
        ));
    };
    let number = match (&arg, found.takes_arg()) {
        (Some(_), false) => return Err(format!("operation {op} takes no argument")),
        (Some(a), true) => Some(
            a.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("operation {op} needs a finite number, got '{a}'"))?,
        ),
        (None, _) => None,
    };
    found.check_arg(number).map_err(|e| match e {
        ArgError::Missing => format!("operation {op} needs a scalar argument: {op} <x>"),
        ArgError::Needless => format!("operation {op} takes no argument"),
        ArgError::NotFinite => format!("operation {op} needs a finite number"),
        ArgError::Zero => format!("operation {op} by zero is undefined"),
    })?;
    Ok((op, arg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(String, Option<String>), String> {
        check_operation(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn operations_are_checked_against_the_catalogue_before_submitting() {
        assert_eq!(check(&["ln"]), Ok(("ln".into(), None)));
        // The argument goes to the job as written; the check trims it.
        assert_eq!(
            check(&["mul", " 1.852"]),
            Ok(("mul".into(), Some(" 1.852".into())))
        );
        assert_eq!(
            check(&["sqrt"]).unwrap_err(),
            format!(
                "unknown operation 'sqrt': supported operations are {}",
                Op::catalogue_of(Kind::Number)
            )
        );
        assert_eq!(
            check(&["ln", "1"]).unwrap_err(),
            "operation ln takes no argument"
        );
        assert_eq!(
            check(&["mul"]).unwrap_err(),
            "operation mul needs a scalar argument: mul <x>"
        );
        assert_eq!(
            check(&["div", "0"]).unwrap_err(),
            "operation div by zero is undefined"
        );
        assert_eq!(
            check(&["add", "inf"]).unwrap_err(),
            "operation add needs a finite number, got 'inf'"
        );
        assert_eq!(
            check(&["add", "x"]).unwrap_err(),
            "operation add needs a finite number, got 'x'"
        );
    }
}
