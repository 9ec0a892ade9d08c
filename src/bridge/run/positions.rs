//! A position query's job (jobs/README.md, "Positions"): its lines pair
//! with the records sent, each record's ended by one line, and a
//! geofence's `detect` lines come before its record's end.

use super::Answers;
use crate::bridge::framing::{self, OutputError, PositionLine};
use crate::lines::quote;
use crate::vocab::{DetectEvent, Event, Value};

/// What a job answering a position query writes for each record (`json`
/// framing; jobs/README.md, "Positions"): its lines pair with the records
/// sent, as in `value` framing, each record ended by one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PositionAnswers {
    /// A number, or none: `{"datetime","value"}` or `{"datetime"}`.
    Measure,
    /// The instant itself: `{"datetime","coordinates"}`.
    Position,
    /// 0..n `{"datetime","coordinates","detect"}`, then `{"datetime"}`.
    Geofence,
}

impl PositionAnswers {
    /// The answers to `step`.
    pub(crate) fn of(step: &crate::position::PositionStep) -> PositionAnswers {
        use crate::position::PositionStep;
        match step {
            PositionStep::Measure(_) => PositionAnswers::Measure,
            PositionStep::Position => PositionAnswers::Position,
            PositionStep::Geofence { .. } => PositionAnswers::Geofence,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PositionAnswers::Measure => "measure",
            PositionAnswers::Position => "position",
            PositionAnswers::Geofence => "geofence",
        }
    }

    /// The line that ends a record, as jobs/README.md has it.
    fn expected(self) -> &'static str {
        match self {
            PositionAnswers::Measure => "{\"datetime\",\"value\"} or {\"datetime\"} alone",
            PositionAnswers::Position => "{\"datetime\",\"coordinates\"}",
            PositionAnswers::Geofence => {
                "{\"datetime\",\"coordinates\",\"detect\"} lines, then {\"datetime\"} alone"
            }
        }
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
                PositionAnswers::Geofence,
                PositionLine::Detect {
                    datetime,
                    point,
                    detect,
                },
            ) => {
                if self.pending.is_empty() {
                    return Err(OutputError::Unasked {
                        line: line_no,
                        text: quote(line),
                    });
                }
                self.events.push(Event::Detect(DetectEvent {
                    datetime,
                    value: Value::Point(point),
                    detect,
                    property: self.property.clone(),
                    skipped: std::mem::take(&mut self.carry),
                }));
                Ok(())
            }
            (_, PositionLine::Detect { .. }) => Err(wrong()),
            (_, PositionLine::End { datetime, value }) => {
                let fits = matches!(
                    (&value, positions),
                    (None, _)
                        | (Some(Value::Number(_)), PositionAnswers::Measure)
                        | (Some(Value::Point(_)), PositionAnswers::Position)
                );
                if !fits {
                    return Err(wrong());
                }
                self.next_record(datetime.clone(), line, line_no)?;
                match value {
                    Some(value) => self.answer(datetime, value),
                    None => Ok(()),
                }
            }
        }
    }

    /// The record a position query's line at `datetime` ends: the next one
    /// awaiting its answers, which must be at that datetime (verbatim), so
    /// that no answer is ever paired with another record.
    pub(super) fn next_record(
        &mut self,
        datetime: String,
        line: &[u8],
        line_no: u64,
    ) -> Result<(), OutputError> {
        let Some(record) = self.pending.pop_front() else {
            return Err(OutputError::Unasked {
                line: line_no,
                text: quote(line),
            });
        };
        if record.datetime != datetime {
            return Err(OutputError::NotItsRecord {
                line: line_no,
                datetime,
                expected: record.datetime,
                text: quote(line),
            });
        }
        Ok(())
    }
}
