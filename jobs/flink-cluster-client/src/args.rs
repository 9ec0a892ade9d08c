//! The command line: options, and the operation checked before anything is
//! submitted.

use std::path::PathBuf;
use std::time::Duration;

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
    pub jar: PathBuf,
    pub listen: String,
    pub schedule_timeout: Duration,
    pub op: String,
    pub arg: Option<String>,
}

pub(crate) fn parse_args() -> Result<Options, Exit> {
    let mut args = std::env::args().skip(1);
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut rest = env("MFSTREAM_FLINK_REST");
    let mut jar = None;
    let mut listen = env("MFSTREAM_FLINK_LISTEN").unwrap_or_else(|| "127.0.0.1".to_owned());
    let mut timeout = env("MFSTREAM_FLINK_SCHEDULE_TIMEOUT").unwrap_or_else(|| "60".to_owned());
    let mut positional = Vec::new();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match arg.as_str() {
            "--rest" => rest = Some(value("--rest")?),
            "--jar" => jar = Some(PathBuf::from(value("--jar")?)),
            "--listen" => listen = value("--listen")?,
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
    let rest = rest.ok_or_else(|| {
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
    Ok(Options {
        rest,
        jar,
        listen,
        schedule_timeout,
        op,
        arg,
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
    let binary = match op.as_str() {
        "ln" | "exp" | "log10" | "ceil" | "floor" | "abs" | "degrees" | "radians" | "sin"
        | "cos" | "tan" => false,
        "add" | "sub" | "mul" | "div" => true,
        _ => {
            return Err(format!(
                "unknown operation '{op}': supported operations are ln, exp, log10, ceil, floor, abs, degrees, radians, sin, cos, tan, add <x>, sub <x>, mul <x>, div <x>"
            ));
        }
    };
    match (&arg, binary) {
        (Some(_), false) => Err(format!("operation {op} takes no argument")),
        (None, true) => Err(format!("operation {op} needs a scalar argument: {op} <x>")),
        (Some(a), true) => match a.trim().parse::<f64>() {
            Ok(x) if !x.is_finite() => {
                Err(format!("operation {op} needs a finite number, got '{a}'"))
            }
            Ok(0.0) if op == "div" => Err("operation div by zero is undefined".to_owned()),
            Ok(_) => Ok((op, arg)),
            Err(_) => Err(format!("operation {op} needs a finite number, got '{a}'")),
        },
        (None, false) => Ok((op, arg)),
    }
}
