//! The calls of Flink's REST API that the client makes.

use std::path::Path;

use serde_json::Value;

use crate::http::{Base, multipart_file};

/// The entry class of the cluster job (jobs/flink/MfstreamClusterJob.java).
pub const ENTRY_CLASS: &str = "MfstreamClusterJob";

/// What the job's failures carry: the class of the exception that the job
/// throws for a bad line or a domain error (jobs/jvm/JobError.java, in the
/// default package), as a stack trace names it.
const JOB_ERROR: &str = "JobError: ";

/// A Flink cluster, by its REST address.
#[derive(Debug)]
pub struct Cluster {
    base: Base,
}

fn json(response: crate::http::Response, what: &str) -> Result<Value, String> {
    if !(200..300).contains(&response.status) {
        return Err(format!(
            "{what}: HTTP {}: {}",
            response.status,
            errors_of(&response.text())
        ));
    }
    serde_json::from_slice(&response.body)
        .map_err(|e| format!("{what}: not JSON ({e}): {}", response.text()))
}

/// Flink's `{"errors":[…]}` as one line per error, or the body itself.
fn errors_of(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(map)) => match map.get("errors").and_then(Value::as_array) {
            Some(errors) => errors
                .iter()
                .map(|e| {
                    e.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| e.to_string())
                })
                .map(|e| job_error(&e).unwrap_or(e))
                .collect::<Vec<_>>()
                .join("\n"),
            None => body.to_owned(),
        },
        _ => body.to_owned(),
    }
}

/// The message of the job's own error in a stack trace, if there is one.
fn job_error(text: &str) -> Option<String> {
    // The class name alone, not the tail of another (`org.x.SomeJobError`).
    let at = text
        .match_indices(JOB_ERROR)
        .map(|(at, _)| at)
        .find(|&at| {
            text[..at]
                .chars()
                .next_back()
                .is_none_or(|c| c.is_whitespace())
        })?;
    let message = &text[at + JOB_ERROR.len()..];
    Some(message.lines().next().unwrap_or("").to_owned())
}

/// The state of a job, and whether it is terminal.
pub fn is_terminal(state: &str) -> bool {
    matches!(state, "FINISHED" | "FAILED" | "CANCELED" | "SUSPENDED")
}

impl Cluster {
    pub fn new(rest: &str) -> Result<Cluster, String> {
        Ok(Cluster {
            base: Base::parse(rest)?,
        })
    }

    /// The id of the uploaded jar named like `jar`'s file, uploading it when
    /// the cluster has none: the jar's name carries a hash of its sources,
    /// so an unchanged job is uploaded once per cluster.
    pub fn jar_id(&self, jar: &Path) -> Result<String, String> {
        let name = jar
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("not a jar file name: {}", jar.display()))?;
        let listed = json(self.base.get("/jars")?, "listing the uploaded jars")?;
        let found = listed["files"].as_array().and_then(|files| {
            files
                .iter()
                .find(|f| f["name"].as_str() == Some(name))
                .and_then(|f| f["id"].as_str())
        });
        if let Some(id) = found {
            return Ok(id.to_owned());
        }
        let content = std::fs::read(jar).map_err(|e| format!("{}: {e}", jar.display()))?;
        let (content_type, body) = multipart_file("jarfile", name, &content);
        let uploaded = json(
            self.base
                .request("POST", "/jars/upload", Some(&content_type), &body)?,
            "uploading the job jar",
        )?;
        let path = uploaded["filename"]
            .as_str()
            .ok_or_else(|| format!("uploading the job jar: no filename in {uploaded}"))?;
        Ok(path.rsplit('/').next().unwrap_or(path).to_owned())
    }

    /// Runs the jar's job with `args`: its job id.
    pub fn run(&self, jar_id: &str, args: &[String]) -> Result<String, String> {
        let request = serde_json::json!({
            "entryClass": ENTRY_CLASS,
            "programArgsList": args,
            "parallelism": 1,
        });
        let response = self.base.request(
            "POST",
            &format!("/jars/{jar_id}/run"),
            Some("application/json"),
            request.to_string().as_bytes(),
        )?;
        let started = json(response, "submitting the job")?;
        started["jobid"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("submitting the job: no jobid in {started}"))
    }

    /// The job's state from `/jobs/overview` (current, unlike `/jobs/<id>`,
    /// which is cached for seconds); `None` when the cluster does not know it.
    pub fn state(&self, jid: &str) -> Result<Option<String>, String> {
        let overview = json(self.base.get("/jobs/overview")?, "reading /jobs/overview")?;
        Ok(overview["jobs"].as_array().and_then(|jobs| {
            jobs.iter()
                .find(|j| j["jid"].as_str() == Some(jid))
                .and_then(|j| j["state"].as_str())
                .map(str::to_owned)
        }))
    }

    /// Asks the cluster to cancel the job.
    pub fn cancel(&self, jid: &str) -> Result<(), String> {
        let response =
            self.base
                .request("PATCH", &format!("/jobs/{jid}?mode=cancel"), None, &[])?;
        if (200..300).contains(&response.status) {
            Ok(())
        } else {
            Err(format!(
                "cancelling job {jid}: HTTP {}: {}",
                response.status,
                errors_of(&response.text())
            ))
        }
    }

    /// Why the job failed: the job's own message (`line 2: ln is defined
    /// …`) when it threw one, else the first line of Flink's root cause,
    /// with whether it is the job's own error. `None` while the cluster has
    /// recorded no exception yet.
    pub fn failure(&self, jid: &str) -> Result<Option<(String, bool)>, String> {
        let exceptions = json(
            self.base.get(&format!("/jobs/{jid}/exceptions"))?,
            "reading the job's exceptions",
        )?;
        let mut texts = Vec::new();
        strings(&exceptions, &mut texts);
        if let Some(message) = texts.iter().find_map(|t| job_error(t)) {
            return Ok(Some((message, true)));
        }
        let entry = &exceptions["exceptionHistory"]["entries"][0];
        let root = entry["stacktrace"]
            .as_str()
            .or_else(|| exceptions["root-exception"].as_str());
        Ok(root.map(|trace| {
            // The deepest "Caused by" names the cause best.
            let cause = trace
                .lines()
                .filter_map(|l| l.strip_prefix("Caused by: "))
                .next_back()
                .or_else(|| trace.lines().next())
                .unwrap_or("")
                .to_owned();
            let location = entry["taskManagerLocation"]
                .as_str()
                .map(|l| format!(" (on TaskManager {l})"))
                .unwrap_or_default();
            (format!("{cause}{location}"), false)
        }))
    }

    /// Slots in use and in all, from `/overview`, for messages.
    pub fn slots(&self) -> Result<(u64, u64), String> {
        let overview = json(self.base.get("/overview")?, "reading /overview")?;
        let total = overview["slots-total"].as_u64().unwrap_or(0);
        let available = overview["slots-available"].as_u64().unwrap_or(0);
        Ok((total.saturating_sub(available), total))
    }
}

/// Every string in a JSON document.
fn strings<'a>(value: &'a Value, into: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => into.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, into)),
        Value::Object(map) => map.values().for_each(|v| strings(v, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jobs_own_error_is_found_in_a_stack_trace() {
        let trace = "org.apache.flink.runtime.JobException: Recovery is suppressed\n\tat x\nCaused by: JobError: line 2: ln is defined for positive values only, got 0\n\tat y";
        assert_eq!(
            job_error(trace).as_deref(),
            Some("line 2: ln is defined for positive values only, got 0")
        );
        assert_eq!(job_error("java.io.IOException: boom"), None);
        assert_eq!(job_error("Caused by: org.x.SomeJobError: boom"), None);
    }
}
