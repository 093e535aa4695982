//! Capture at a port pipe's exit: classic pcap (microsecond timestamps,
//! Ethernet), each frame stamped with its scheduled departure time from the
//! pipe, mapped from the engine's monotonic clock to wall-clock time once at
//! start. Writes go through a large buffer; any frame that could not be
//! written is counted (`lost`) and reported in the stats, never dropped silently.

use std::fs::File;
use std::io::{BufWriter, Write};

pub struct Capture {
    out: Option<BufWriter<File>>,
    pub path: String,
    pub written: u64,
    pub lost: u64,
    pub error: Option<String>,
    /// wall clock (ns since epoch) minus monotonic (ns) at engine start
    offset_ns: i128,
}

impl Capture {
    pub fn create(path: &str, offset_ns: i128) -> Result<Capture, String> {
        let file = File::create(path).map_err(|e| format!("{path}: {e}"))?;
        let mut out = BufWriter::with_capacity(4 << 20, file);
        let mut hdr = Vec::with_capacity(24);
        hdr.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        hdr.extend_from_slice(&2u16.to_le_bytes());
        hdr.extend_from_slice(&4u16.to_le_bytes());
        hdr.extend_from_slice(&0i32.to_le_bytes());
        hdr.extend_from_slice(&0u32.to_le_bytes());
        hdr.extend_from_slice(&65535u32.to_le_bytes());
        hdr.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        out.write_all(&hdr).map_err(|e| format!("{path}: {e}"))?;
        Ok(Capture {
            out: Some(out),
            path: path.to_string(),
            written: 0,
            lost: 0,
            error: None,
            offset_ns,
        })
    }

    pub fn write(&mut self, mono_ns: u64, frame: &[u8]) {
        let Some(out) = self.out.as_mut() else {
            self.lost += 1;
            return;
        };
        let wall = (mono_ns as i128 + self.offset_ns).max(0) as u128;
        let (sec, usec) = (
            (wall / 1_000_000_000) as u32,
            ((wall % 1_000_000_000) / 1000) as u32,
        );
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&sec.to_le_bytes());
        rec[4..8].copy_from_slice(&usec.to_le_bytes());
        rec[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        match out.write_all(&rec).and_then(|_| out.write_all(frame)) {
            Ok(()) => self.written += 1,
            Err(e) => {
                // a partial record would corrupt the file: stop writing, count the rest
                self.error = Some(e.to_string());
                self.out = None;
                self.lost += 1;
            }
        }
    }

    pub fn flush(&mut self) {
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.flush() {
                self.error = Some(e.to_string());
                self.out = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_readable_pcap() {
        let path =
            std::env::temp_dir().join(format!("swell-link-test-{}.pcap", std::process::id()));
        let p = path.to_str().unwrap();
        let mut c = Capture::create(p, 1_000_000_000_000_000_000).unwrap();
        c.write(1_500_000, &[1u8; 60]);
        c.write(2_500_001, &[2u8; 42]);
        c.flush();
        let data = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(data.len(), 24 + 16 + 60 + 16 + 42);
        assert_eq!(
            u32::from_le_bytes(data[24..28].try_into().unwrap()),
            1_000_000_000
        );
        assert_eq!(u32::from_le_bytes(data[28..32].try_into().unwrap()), 1500);
        assert_eq!(u32::from_le_bytes(data[104..108].try_into().unwrap()), 2500);
        assert_eq!((c.written, c.lost), (2, 0));
    }
}
