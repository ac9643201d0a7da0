//! Finding the CONTROL_RESULT block in an agent's captured output.
//!
//! The block is the last *complete* `<<<CONTROL_RESULT>>>` …
//! `<<<END_CONTROL_RESULT>>>` pair. An opener after the last complete block
//! that never closes does not count: agents often echo the protocol while
//! thinking, and the answer is what they finished last.
//!
//! An opener can also appear where it is not one: quoted in a JSON string
//! of the result itself (a PR body documenting the protocol) or announced
//! in prose just before the real one. So the block's opener is the last one
//! before the end marker whose content is one JSON value; when none is,
//! the last opener is used and the parser reports why its content is not.

use super::error::ResultError;
use super::limits::MAX_CONTROL_RESULT_BYTES;

pub const BLOCK_START: &str = "<<<CONTROL_RESULT>>>";
pub const BLOCK_END: &str = "<<<END_CONTROL_RESULT>>>";

/// What the supervisor captured of the agent's final output. Only `tail`
/// (the part captured contiguously up to EOF) is searched; when
/// `head_truncated` is set, something before it was dropped and a block
/// there is gone for good, which the diagnosis says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedOutput {
    pub tail: String,
    pub head_truncated: bool,
    /// Total bytes the agent wrote, for the diagnosis.
    pub total_bytes: u64,
}

impl CapturedOutput {
    /// Output captured whole.
    pub fn complete(text: impl Into<String>) -> Self {
        let tail = text.into();
        let total_bytes = tail.len() as u64;
        Self {
            tail,
            head_truncated: false,
            total_bytes,
        }
    }
}

/// The content between the markers of the last complete block, size-checked
/// in bytes before anything parses it.
pub fn extract_block(captured: &CapturedOutput) -> Result<&str, ResultError> {
    let tail = captured.tail.as_str();
    let Some(end) = tail.rfind(BLOCK_END) else {
        return Err(if tail.contains(BLOCK_START) {
            ResultError::IncompleteBlock
        } else {
            ResultError::NoBlock {
                head_truncated: captured.head_truncated,
                searched_bytes: tail.len(),
                total_bytes: captured.total_bytes,
            }
        });
    };
    let Some(start) = opener_of(&tail[..end]) else {
        // An end marker with no opener in the captured tail: the opener was
        // either never written or lost with a truncated head. When the head
        // was dropped and everything before the end marker already exceeds
        // the limit, the block (if there was one) is larger still, so the
        // honest diagnosis is its size, not its absence.
        if captured.head_truncated && end > MAX_CONTROL_RESULT_BYTES {
            return Err(ResultError::BlockTooLarge {
                bytes: end,
                max: MAX_CONTROL_RESULT_BYTES,
            });
        }
        return Err(ResultError::NoBlock {
            head_truncated: captured.head_truncated,
            searched_bytes: tail.len(),
            total_bytes: captured.total_bytes,
        });
    };
    let content = &tail[start + BLOCK_START.len()..end];
    if content.len() > MAX_CONTROL_RESULT_BYTES {
        return Err(ResultError::BlockTooLarge {
            bytes: content.len(),
            max: MAX_CONTROL_RESULT_BYTES,
        });
    }
    Ok(content)
}

/// How many openers before the end marker are tried, from the last back.
const MAX_OPENERS_TRIED: usize = 8;

/// The offset of the opener that starts the block ending where `before`
/// ends (see the module documentation).
fn opener_of(before: &str) -> Option<usize> {
    let last = before.rfind(BLOCK_START)?;
    let mut candidate = Some(last);
    for _ in 0..MAX_OPENERS_TRIED {
        let Some(start) = candidate else { break };
        let content = &before[start + BLOCK_START.len()..];
        if content.len() > MAX_CONTROL_RESULT_BYTES {
            break;
        }
        if serde_json::from_str::<serde::de::IgnoredAny>(content.trim()).is_ok() {
            return Some(start);
        }
        candidate = before[..start].rfind(BLOCK_START);
    }
    Some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(json: &str) -> String {
        format!("{BLOCK_START}\n{json}\n{BLOCK_END}")
    }

    #[test]
    fn the_last_complete_block_wins() {
        let out = format!(
            "{}\nthinking\n{}\n{BLOCK_START} draft",
            block("1"),
            block("2")
        );
        assert_eq!(
            extract_block(&CapturedOutput::complete(out)).map(str::trim),
            Ok("2")
        );
    }

    #[test]
    fn a_block_of_exactly_the_limit_is_accepted_and_one_byte_more_is_not() {
        let at_limit = format!(
            "{BLOCK_START}{}{BLOCK_END}",
            "x".repeat(MAX_CONTROL_RESULT_BYTES)
        );
        assert_eq!(
            extract_block(&CapturedOutput::complete(at_limit)).map(str::len),
            Ok(MAX_CONTROL_RESULT_BYTES)
        );
        let over = format!(
            "{BLOCK_START}{}{BLOCK_END}",
            "x".repeat(MAX_CONTROL_RESULT_BYTES + 1)
        );
        assert_eq!(
            extract_block(&CapturedOutput::complete(over)),
            Err(ResultError::BlockTooLarge {
                bytes: MAX_CONTROL_RESULT_BYTES + 1,
                max: MAX_CONTROL_RESULT_BYTES
            })
        );
    }

    #[test]
    fn an_opener_without_end_is_incomplete() {
        let out = format!("{BLOCK_START}\n{{");
        assert_eq!(
            extract_block(&CapturedOutput::complete(out)),
            Err(ResultError::IncompleteBlock)
        );
    }

    #[test]
    fn an_end_after_more_than_the_limit_of_dropped_output_is_too_large() {
        let captured = CapturedOutput {
            tail: format!(
                "{}\n{BLOCK_END}\n",
                "x".repeat(MAX_CONTROL_RESULT_BYTES + 10)
            ),
            head_truncated: true,
            total_bytes: 3 * MAX_CONTROL_RESULT_BYTES as u64,
        };
        assert!(matches!(
            extract_block(&captured),
            Err(ResultError::BlockTooLarge { bytes, .. }) if bytes > MAX_CONTROL_RESULT_BYTES
        ));
        let short = CapturedOutput {
            tail: format!("short\n{BLOCK_END}"),
            ..captured
        };
        assert!(matches!(
            extract_block(&short),
            Err(ResultError::NoBlock {
                head_truncated: true,
                ..
            })
        ));
    }

    #[test]
    fn an_end_without_opener_is_no_block() {
        let out = format!("x\n{BLOCK_END}");
        assert!(matches!(
            extract_block(&CapturedOutput::complete(out)),
            Err(ResultError::NoBlock { .. })
        ));
    }
}
