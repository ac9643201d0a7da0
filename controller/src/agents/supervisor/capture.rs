//! Bounded, redacted capture of a child's output.
//!
//! Each stream keeps its first `head_bytes` and its last `tail_bytes`; what
//! lies between is counted, not kept, so a child printing gigabytes costs a
//! fixed amount of memory. The CONTROL_RESULT parser searches the tail.
//!
//! The optional log file is written as output arrives, line by line, each
//! line redacted before it touches the disk; it stops growing at its own
//! bound and says how much it left out. A PEM private-key block spans lines,
//! which per-line redaction cannot see whole, so the sink remembers when it
//! is inside one and blanks every line until the block ends.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::agents::profile::{OutputFormat, ReadOutput};
use crate::agents::result::BLOCK_START;
use crate::redact::Redactor;

/// Which pipe a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How much of each stream is kept in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureLimits {
    pub head_bytes: usize,
    pub tail_bytes: usize,
}

impl CaptureLimits {
    /// Agent output: 256 KiB of head, and a tail 64 KiB larger than the
    /// largest CONTROL_RESULT block, so a block at the limit still fits
    /// whole with its markers and a usage line after it, and a block over
    /// the limit is refused by its size rather than reported missing.
    pub const AGENT: Self = Self {
        head_bytes: 256 * 1024,
        tail_bytes: crate::agents::result::limits::MAX_CONTROL_RESULT_BYTES + 64 * 1024,
    };
}

/// A finished, redacted capture. When nothing was omitted the whole output
/// is in `head` and `tail` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedactedCapture {
    pub head: String,
    pub tail: String,
    pub total_bytes: u64,
    pub omitted_bytes: u64,
}

impl RedactedCapture {
    /// The end of the output: the tail when something was omitted, else all
    /// of it. This is the text the CONTROL_RESULT parser searches.
    pub fn tail_text(&self) -> &str {
        if self.omitted_bytes == 0 {
            &self.head
        } else {
            &self.tail
        }
    }

    /// Whether the middle of the output was dropped.
    pub fn is_truncated(&self) -> bool {
        self.omitted_bytes > 0
    }
}

/// The in-memory head + tail of one stream.
#[derive(Debug)]
pub struct BoundedCapture {
    limits: CaptureLimits,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl BoundedCapture {
    pub fn new(limits: CaptureLimits) -> Self {
        Self {
            limits,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let head_room = self.limits.head_bytes.saturating_sub(self.head.len());
        let into_head = head_room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.len() >= self.limits.tail_bytes {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.limits.tail_bytes..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.limits.tail_bytes);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// What is kept so far as text, head and tail on lines of their own,
    /// unredacted: only for reading usage counts, never to store or show.
    fn text_so_far(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if !self.tail.is_empty() {
            text.push('\n');
            let (front, back) = self.tail.as_slices();
            text.push_str(&String::from_utf8_lossy(front));
            text.push_str(&String::from_utf8_lossy(back));
        }
        text
    }

    /// Redacts and freezes the capture. When the middle was dropped, the
    /// head is cut back to its last line break and the tail starts after its
    /// first one, so no half line (possibly half a secret that the patterns
    /// no longer recognise) survives at either edge of the gap.
    pub fn finish(self, redactor: &Redactor) -> RedactedCapture {
        let kept = self.head.len() as u64 + self.tail.len() as u64;
        let mut tail: Vec<u8> = self.tail.into();
        if kept == self.total {
            let mut all = self.head;
            all.append(&mut tail);
            return RedactedCapture {
                head: redactor.redact(&String::from_utf8_lossy(&all)).into_owned(),
                tail: String::new(),
                total_bytes: self.total,
                omitted_bytes: 0,
            };
        }
        let head_end = self
            .head
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // A result opener is as clean an edge as a line break (nothing of a
        // secret precedes it on its side of the cut), and output that never
        // breaks its lines would otherwise lose its whole tail, result and
        // all.
        let after_newline = tail.iter().position(|&b| b == b'\n').map(|i| i + 1);
        let opener = BLOCK_START.as_bytes();
        let at_opener = tail.windows(opener.len()).position(|w| w == opener);
        let tail_start = match (after_newline, at_opener) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => tail.len(),
        };
        let head = &self.head[..head_end];
        let tail = &tail[tail_start..];
        RedactedCapture {
            head: redactor.redact(&String::from_utf8_lossy(head)).into_owned(),
            tail: redactor.redact(&String::from_utf8_lossy(tail)).into_owned(),
            total_bytes: self.total,
            omitted_bytes: self.total - head.len() as u64 - tail.len() as u64,
        }
    }
}

/// Splits a byte stream into lines, flushing over-long partial lines so
/// memory stays bounded.
#[derive(Debug, Default)]
struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    const MAX_LINE: usize = 64 * 1024;

    fn push(&mut self, bytes: &[u8], mut emit: impl FnMut(&[u8])) {
        for &b in bytes {
            self.pending.push(b);
            if b == b'\n' || self.pending.len() >= Self::MAX_LINE {
                emit(&self.pending);
                self.pending.clear();
            }
        }
    }

    fn finish(&mut self, mut emit: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            emit(&self.pending);
            self.pending.clear();
        }
    }
}

/// The redacted, size-bounded `output.log` of one launch.
#[derive(Debug)]
pub struct LogFile {
    out: BufWriter<File>,
    limit: u64,
    written: u64,
    omitted: u64,
    in_private_key: bool,
}

impl LogFile {
    /// Default bound of a launch log file.
    pub const DEFAULT_LIMIT: u64 = 8 * 1024 * 1024;

    pub fn create(path: &Path, limit: u64) -> io::Result<Self> {
        Ok(Self {
            out: BufWriter::new(File::create(path)?),
            limit,
            written: 0,
            omitted: 0,
            in_private_key: false,
        })
    }

    fn write_line(&mut self, line: &[u8], redactor: &Redactor) -> io::Result<()> {
        let text = String::from_utf8_lossy(line);
        let redacted = if self.in_private_key {
            if text.contains("-----END") && text.contains("PRIVATE KEY-----") {
                self.in_private_key = false;
            }
            std::borrow::Cow::Borrowed("[REDACTED:private-key]\n")
        } else {
            if text.contains("-----BEGIN")
                && text.contains("PRIVATE KEY-----")
                && !text.contains("-----END")
            {
                self.in_private_key = true;
            }
            redactor.redact(&text)
        };
        let bytes = redacted.as_bytes();
        if self.written + bytes.len() as u64 > self.limit {
            self.omitted += line.len() as u64;
            return Ok(());
        }
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn finish(mut self) -> io::Result<()> {
        if self.omitted > 0 {
            writeln!(
                self.out,
                "\n[autoforge: log limit of {} bytes reached; {} further bytes not written]",
                self.limit, self.omitted
            )?;
        }
        self.out.flush()
    }
}

/// Where a running child's output goes: per-stream captures and the log.
#[derive(Debug)]
pub struct OutputSink {
    stdout: BoundedCapture,
    /// `None` merges stderr into the stdout capture (validation records a
    /// single output tail in arrival order).
    stderr: Option<BoundedCapture>,
    splitters: [LineSplitter; 2],
    log: Option<LogFile>,
    log_error: Option<io::Error>,
    redactor: Redactor,
    /// How to read token usage from the output while it runs, if at all.
    usage_format: Option<OutputFormat>,
}

impl OutputSink {
    /// Reads tokens so far with `format` at every heartbeat (a format that
    /// reports no usage is not read).
    pub fn read_usage_with(mut self, format: &OutputFormat) -> Self {
        self.usage_format = format.reports_usage().then(|| format.clone());
        self
    }

    /// The usage the output shows so far; `None` when the sink reads none.
    /// Only the counts are used: the message is dropped unredacted.
    pub fn usage_so_far(&self) -> Option<ReadOutput> {
        let format = self.usage_format.as_ref()?;
        let stderr = self
            .stderr
            .as_ref()
            .map(BoundedCapture::text_so_far)
            .unwrap_or_default();
        let read = format.read(&self.stdout.text_so_far(), &stderr);
        Some(ReadOutput {
            message: None,
            ..read
        })
    }

    pub fn separate(limits: CaptureLimits, log: Option<LogFile>, redactor: Redactor) -> Self {
        Self {
            stdout: BoundedCapture::new(limits),
            stderr: Some(BoundedCapture::new(limits)),
            splitters: Default::default(),
            log,
            log_error: None,
            redactor,
            usage_format: None,
        }
    }

    pub fn merged(limits: CaptureLimits, redactor: Redactor) -> Self {
        Self {
            stdout: BoundedCapture::new(limits),
            stderr: None,
            splitters: Default::default(),
            log: None,
            log_error: None,
            redactor,
            usage_format: None,
        }
    }

    pub fn push(&mut self, stream: Stream, bytes: &[u8]) {
        match (stream, self.stderr.as_mut()) {
            (Stream::Stderr, Some(stderr)) => stderr.push(bytes),
            _ => self.stdout.push(bytes),
        }
        if let Some(log) = self.log.as_mut() {
            let splitter = &mut self.splitters[stream as usize];
            let (redactor, log_error) = (&self.redactor, &mut self.log_error);
            splitter.push(bytes, |line| {
                if let Err(e) = log.write_line(line, redactor) {
                    log_error.get_or_insert(e);
                }
            });
        }
    }

    /// Total bytes received on both streams.
    pub fn total_bytes(&self) -> u64 {
        self.stdout.total_bytes() + self.stderr.as_ref().map_or(0, BoundedCapture::total_bytes)
    }

    pub fn flush_log(&mut self) {
        if let Some(Err(e)) = self.log.as_mut().map(LogFile::flush) {
            self.log_error.get_or_insert(e);
        }
    }

    /// The redacted captures (stderr is empty when merged) and the first
    /// error met while writing the log, if any.
    pub fn finish(mut self) -> (RedactedCapture, RedactedCapture, Option<io::Error>) {
        if let Some(mut log) = self.log.take() {
            for splitter in &mut self.splitters {
                let (redactor, log_error) = (&self.redactor, &mut self.log_error);
                splitter.finish(|line| {
                    if let Err(e) = log.write_line(line, redactor) {
                        log_error.get_or_insert(e);
                    }
                });
            }
            if let Err(e) = log.finish() {
                self.log_error.get_or_insert(e);
            }
        }
        let stdout = self.stdout.finish(&self.redactor);
        let stderr = self
            .stderr
            .map(|c| c.finish(&self.redactor))
            .unwrap_or_default();
        (stdout, stderr, self.log_error)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use secrecy::SecretString;

    const SMALL: CaptureLimits = CaptureLimits {
        head_bytes: 8,
        tail_bytes: 8,
    };

    #[test]
    fn small_output_is_kept_whole_in_the_head() {
        let mut c = BoundedCapture::new(SMALL);
        c.push(b"abc\n");
        c.push(b"def\n");
        let out = c.finish(&Redactor::new());
        assert_eq!(out.head, "abc\ndef\n");
        assert_eq!(out.tail_text(), "abc\ndef\n");
        assert!(!out.is_truncated());
    }

    #[test]
    fn large_output_keeps_whole_lines_at_both_ends_and_counts_the_rest() {
        let mut c = BoundedCapture::new(SMALL);
        for line in ["one\n", "two\n", "three\n", "four\n", "five\n", "six\n"] {
            c.push(line.as_bytes());
        }
        let out = c.finish(&Redactor::new());
        assert_eq!(out.head, "one\ntwo\n");
        assert_eq!(out.tail, "six\n");
        assert_eq!(out.total_bytes, 28);
        assert_eq!(out.omitted_bytes, 28 - 8 - 4);
        assert_eq!(out.tail_text(), "six\n");
    }

    #[test]
    fn output_without_line_breaks_keeps_its_result_block_in_the_tail() {
        let limits = CaptureLimits {
            head_bytes: 8,
            tail_bytes: 80,
        };
        let mut c = BoundedCapture::new(limits);
        c.push(&[b'x'; 300]);
        let block = format!("{BLOCK_START}{{}}{}", crate::agents::result::BLOCK_END);
        c.push(block.as_bytes());
        let out = c.finish(&Redactor::new());
        assert!(out.is_truncated());
        assert_eq!(out.tail_text(), block);
    }

    #[test]
    fn a_chunk_larger_than_the_tail_keeps_only_its_end() {
        let mut c = BoundedCapture::new(SMALL);
        c.push(&[b'x'; 100]);
        c.push(b"\nend\n");
        let out = c.finish(&Redactor::new());
        assert_eq!(out.tail, "end\n");
        assert_eq!(out.total_bytes, 105);
    }

    #[test]
    fn the_log_is_redacted_line_by_line_including_key_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        let redactor = Redactor::new().with_secret(SecretString::from("hunter2hunter2"));
        let mut sink = OutputSink::separate(
            CaptureLimits::AGENT,
            Some(LogFile::create(&path, 1 << 20).unwrap()),
            redactor,
        );
        // The secret arrives split across two chunks.
        sink.push(Stream::Stdout, b"pass=hunter2hu");
        sink.push(
            Stream::Stdout,
            b"nter2 ok\n-----BEGIN PRIVATE KEY-----\nMIIEsecret\n",
        );
        sink.push(Stream::Stdout, b"-----END PRIVATE KEY-----\nafter\n");
        let (stdout, _, err) = sink.finish();
        assert!(err.is_none());
        let log = std::fs::read_to_string(&path).unwrap();
        for text in [&log, &stdout.head] {
            assert!(!text.contains("hunter2"), "{text}");
            assert!(!text.contains("MIIEsecret"), "{text}");
            assert!(text.contains("after"), "{text}");
        }
    }

    #[test]
    fn the_log_stops_at_its_limit_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output.log");
        let mut sink = OutputSink::separate(
            SMALL,
            Some(LogFile::create(&path, 10).unwrap()),
            Redactor::new(),
        );
        sink.push(Stream::Stderr, b"12345\n67890\nabcde\n");
        let (_, stderr, _) = sink.finish();
        let log = std::fs::read_to_string(&path).unwrap();
        assert!(log.starts_with("12345\n"), "{log}");
        assert!(log.contains("12 further bytes not written"), "{log}");
        assert_eq!(stderr.total_bytes, 18);
    }
}
