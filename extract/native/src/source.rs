//! A large, reusable read buffer over any `Read`.
//!
//! Records are parsed straight out of this buffer: `fill(n)` makes sure `n`
//! bytes are available at the read position (compacting and refilling, and
//! growing only for records larger than the buffer), `peek(n)` borrows them and
//! `consume(n)` advances. No allocation per packet.

use std::io::{self, Read};

pub struct Source {
    inner: Box<dyn Read + Send>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Bytes consumed since the start of the stream.
    pub offset: u64,
}

impl Source {
    pub fn new(inner: Box<dyn Read + Send>, capacity: usize) -> Self {
        Source {
            inner,
            buf: vec![0; capacity.max(64)],
            pos: 0,
            end: 0,
            eof: false,
            offset: 0,
        }
    }

    /// Bytes available without another read.
    pub fn available(&self) -> usize {
        self.end - self.pos
    }

    /// Make `n` bytes available; `Ok(false)` when the stream ends first
    /// (`available()` then tells how many bytes are left).
    pub fn fill(&mut self, n: usize) -> io::Result<bool> {
        if self.end - self.pos >= n {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if n > self.buf.len() {
            let want = n.max(self.buf.len().saturating_mul(2));
            self.buf.resize(want, 0);
        }
        while self.end < n {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The next `n` bytes; `fill(n)` must have returned true.
    pub fn peek(&self, n: usize) -> &[u8] {
        &self.buf[self.pos..self.pos + n]
    }

    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.pos);
        self.pos += n;
        self.offset += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_and_grows() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut s = Source::new(Box::new(io::Cursor::new(data)), 64);
        assert!(s.fill(10).unwrap());
        assert_eq!(s.peek(3), &[0, 1, 2]);
        s.consume(60);
        assert!(s.fill(200).unwrap());
        assert_eq!(s.peek(1)[0], 60);
        s.consume(200);
        assert!(!s.fill(800).unwrap());
        assert_eq!(s.available(), 740);
        assert_eq!(s.peek(1)[0], 4);
        assert_eq!(s.offset, 260);
    }
}
