//! A position query's job (jobs/README.md, "Positions"): its lines pair
//! with the records sent, each record's ended by one line, and a
//! geofence's `detect` lines come before its record's end.
//!
//! Because they pair, a job that dies can be restarted exactly
//! (jobs/README.md, "Restarts"): the records it left unanswered are sent
//! again, after the last record it measured (the *primer*), whose lines are
//! dropped, so that the new job's state (the previous position, the side
//! of the fence, the datetime a record must follow) is its predecessor's;
//! a `cumulativeLength` counted afresh from the primer is offset by the
//! length answered there. A record's detections are held until the line
//! that ends it, so that those of a record the job died in the middle of
//! are not delivered, then again by its successor.

use super::Answers;
use crate::bridge::framing::{self, OutputError, PositionLine};
use crate::lines::quote;
use mfstream_model::{DetectEvent, Event, Instant, Value};

/// What a job answering a position query writes for each record (`json`
/// framing; jobs/README.md, "Positions"): its lines pair with the records
/// sent, as in `value` framing, each record ended by one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PositionAnswers {
    /// A number, or none: `{"datetime","value"}` or `{"datetime"}`;
    /// `cumulative` for `cumulativeLength`, a running sum a restarted job
    /// counts afresh.
    Measure { cumulative: bool },
    /// The instant itself: `{"datetime","coordinates"}`.
    Position,
    /// 0..n `{"datetime","coordinates","detect"}`, then `{"datetime"}`;
    /// at most `max_detections` for one record (see [`max_detections`]).
    Geofence { max_detections: usize },
}

impl PositionAnswers {
    /// The answers to `step`.
    pub(crate) fn of(step: &mfstream_model::position::PositionStep) -> PositionAnswers {
        use mfstream_model::position::{Measure, PositionStep};
        match step {
            PositionStep::Measure(measure) => PositionAnswers::Measure {
                cumulative: matches!(measure, Measure::CumulativeLength),
            },
            PositionStep::Position => PositionAnswers::Position,
            PositionStep::Geofence { geometry, .. } => PositionAnswers::Geofence {
                max_detections: max_detections(geometry),
            },
        }
    }

    fn name(self) -> &'static str {
        match self {
            PositionAnswers::Measure { .. } => "measure",
            PositionAnswers::Position => "position",
            PositionAnswers::Geofence { .. } => "geofence",
        }
    }

    /// The line that ends a record, as jobs/README.md has it.
    fn expected(self) -> &'static str {
        match self {
            PositionAnswers::Measure { .. } => "{\"datetime\",\"value\"} or {\"datetime\"} alone",
            PositionAnswers::Position => "{\"datetime\",\"coordinates\"}",
            PositionAnswers::Geofence { .. } => {
                "{\"datetime\",\"coordinates\",\"detect\"} lines, then {\"datetime\"} alone"
            }
        }
    }
}

/// The most detections one record of a fence with these vertices can
/// have: a change of side at each of the segment's hits on an edge (at
/// most two per edge, the ends of an overlap) and at its end, then
/// `inside` or `outside` (jobs/README.md, "Geofences"). The host holds a
/// record's detections until its end, so a job that writes more fails the
/// query rather than filling memory.
fn max_detections(fence: &serde_json::Value) -> usize {
    /// The positions (`[x, y]` arrays) in GeoJSON coordinates.
    fn positions(coordinates: &serde_json::Value) -> usize {
        match coordinates.as_array() {
            Some(items) if items.first().is_some_and(serde_json::Value::is_number) => 1,
            Some(items) => items.iter().map(positions).sum(),
            None => 0,
        }
    }
    let vertices = positions(&fence["coordinates"]);
    vertices.saturating_mul(2).saturating_add(2)
}

/// What a restart of a position query's job needs (the module's header):
/// kept by the query across its job's runs.
#[derive(Debug, Default)]
pub(super) struct Resume {
    /// The last record a job measured: answered by a line other than an
    /// error line (a record with no result leaves the job's state as it
    /// was).
    last_measured: Option<Instant>,
    /// `cumulativeLength`: the length answered for `last_measured`, as
    /// delivered.
    last_length: Option<f64>,
    /// The restarted job's first record, `last_measured` again: its lines
    /// are dropped until the one that ends it.
    priming: Option<Instant>,
    /// `cumulativeLength`: what the job's answers are offset by since a
    /// restart (the length at the primer, where the new job counts 0).
    offset: Option<f64>,
    /// The detections of the record awaiting its answers, held until the
    /// line that ends it.
    detections: Vec<DetectEvent>,
}

impl Resume {
    /// The primer a restarted job is sent before the records its
    /// predecessor left unanswered, if it measured any.
    pub(super) fn primer(&self) -> Option<&Instant> {
        self.priming.as_ref()
    }
}

impl Answers {
    /// One line of a position query's job: a geofence's event, or the line
    /// that ends the next record awaiting its answers.
    pub(super) fn take_position_line(
        &mut self,
        positions: PositionAnswers,
        line: &[u8],
        line_no: u64,
    ) -> Result<(), OutputError> {
        let decoded = framing::decode_position(line).map_err(|error| OutputError::NotEvent {
            line: line_no,
            error,
            text: quote(line),
        })?;
        let wrong = || OutputError::WrongAnswer {
            line: line_no,
            step: positions.name(),
            expected: positions.expected(),
            text: quote(line),
        };
        match (positions, decoded) {
            (
                PositionAnswers::Geofence { max_detections },
                PositionLine::Detect {
                    datetime,
                    point,
                    detect,
                },
            ) => {
                let event = DetectEvent {
                    datetime,
                    value: Value::Point(point),
                    detect,
                    property: self.property.clone(),
                    // Set when its record ends.
                    skipped: 0,
                };
                self.hold_detection(event, max_detections, line, line_no)
            }
            (_, PositionLine::Detect { .. }) => Err(wrong()),
            (_, PositionLine::End { datetime, value }) => {
                let fits = matches!(
                    (&value, positions),
                    (None, _)
                        | (Some(Value::Number(_)), PositionAnswers::Measure { .. })
                        | (Some(Value::Point(_)), PositionAnswers::Position)
                );
                if !fits {
                    return Err(wrong());
                }
                if !self.end_record(datetime.clone(), true, line, line_no)? {
                    return Ok(());
                }
                let value = match (value, positions) {
                    (
                        Some(Value::Number(length)),
                        PositionAnswers::Measure { cumulative: true },
                    ) => {
                        // Counted afresh from the primer by a restarted job.
                        let length = self.resume.offset.map_or(length, |offset| offset + length);
                        self.resume.last_length = Some(length);
                        Some(Value::Number(length))
                    }
                    (value, _) => value,
                };
                match value {
                    Some(value) => self.answer(datetime, value),
                    None => Ok(()),
                }
            }
        }
    }

    /// A geofence's detection, held until its record ends: dropped if it
    /// is the primer's (detected before the restart already).
    fn hold_detection(
        &mut self,
        event: DetectEvent,
        max_detections: usize,
        line: &[u8],
        line_no: u64,
    ) -> Result<(), OutputError> {
        if self.resume.priming.is_some() {
            return Ok(());
        }
        let Some(record) = self.pending.front() else {
            return Err(OutputError::Unasked {
                line: line_no,
                text: quote(line),
            });
        };
        if self.resume.detections.len() >= max_detections {
            return Err(OutputError::TooManyDetections {
                line: line_no,
                max: max_detections,
                datetime: record.datetime.clone(),
            });
        }
        self.resume.detections.push(event);
        Ok(())
    }

    /// A position query's line at `datetime` that ends a record (`measured`
    /// unless it is an error line): the primer of a restarted job, whose
    /// lines are dropped (false), or the next record awaiting its answers,
    /// which must be at that datetime (verbatim), so that no answer is ever
    /// paired with another record. Its held detections are delivered then.
    pub(super) fn end_record(
        &mut self,
        datetime: String,
        measured: bool,
        line: &[u8],
        line_no: u64,
    ) -> Result<bool, OutputError> {
        if let Some(primer) = self.resume.priming.take() {
            if primer.datetime != datetime {
                return Err(OutputError::NotItsRecord {
                    line: line_no,
                    datetime,
                    expected: primer.datetime,
                    text: quote(line),
                });
            }
            if !measured {
                // Its state would not be its predecessor's.
                return Err(OutputError::PrimerRefused {
                    line: line_no,
                    datetime,
                    text: quote(line),
                });
            }
            return Ok(false);
        }
        let Some(record) = self.pending.pop_front() else {
            return Err(OutputError::Unasked {
                line: line_no,
                text: quote(line),
            });
        };
        self.ended += 1;
        if record.datetime != datetime {
            return Err(OutputError::NotItsRecord {
                line: line_no,
                datetime,
                expected: record.datetime,
                text: quote(line),
            });
        }
        for mut event in self.resume.detections.drain(..) {
            event.skipped = std::mem::take(&mut self.carry);
            self.events.push(Event::Detect(event));
        }
        if measured {
            self.resume.last_measured = Some(record);
        }
        Ok(true)
    }

    /// Before a restarted job runs: the detections of the record its
    /// predecessor died in are dropped (the new job detects them again),
    /// and the new job is primed with the last record measured.
    pub(super) fn restart_positions(&mut self) {
        let Some(positions) = self.positions else {
            return;
        };
        self.resume.detections.clear();
        self.resume.priming = self.resume.last_measured.clone();
        if positions == (PositionAnswers::Measure { cumulative: true }) {
            self.resume.offset = self.resume.last_length;
        }
    }
}
