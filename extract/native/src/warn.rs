//! Counted warnings: every anomaly is a reason with a count, never silence.
//!
//! Reasons marked "skipped" in [`Warn::skips_packet`] stand for packets that are
//! not returned; all others annotate packets that are returned.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Warn {
    TruncatedLastRecord = 0,
    CorruptRecord,
    ShortPacket,
    UnknownLinktype,
    TsBackwards,
    TsJump,
    NonIp,
    BadIpHeader,
    CaplenExceedsWirelen,
    IpLenExceedsFrame,
    BadInterfaceId,
    BadTcpHeader,
    TruncatedBlock,
    NoTimestamp,
    CorruptBlock,
    ResyncSkippedBytes,
}

pub const N_WARN: usize = 16;

/// Names as seen from Python (`tr.warnings` keys), NUL-terminated for C.
pub const NAMES: [&str; N_WARN] = [
    "truncated_last_record\0",
    "corrupt_record\0",
    "short_packet\0",
    "unknown_linktype\0",
    "ts_backwards\0",
    "ts_jump\0",
    "non_ip\0",
    "bad_ip_header\0",
    "caplen_exceeds_wirelen\0",
    "ip_len_exceeds_frame\0",
    "bad_interface_id\0",
    "bad_tcp_header\0",
    "truncated_block\0",
    "no_timestamp\0",
    "corrupt_block\0",
    "resync_skipped_bytes\0",
];

impl Warn {
    pub fn name(self) -> &'static str {
        NAMES[self as usize].trim_end_matches('\0')
    }

    /// Whether a count of this reason is a count of packets not returned.
    pub fn skips_packet(self) -> bool {
        matches!(
            self,
            Warn::TruncatedLastRecord | Warn::CorruptRecord | Warn::BadInterfaceId
        )
    }
}

#[derive(Clone, Debug, Default)]
pub struct Warnings {
    pub counts: [u64; N_WARN],
}

impl Warnings {
    #[inline]
    pub fn add(&mut self, w: Warn) {
        self.counts[w as usize] += 1;
    }

    pub fn get(&self, w: Warn) -> u64 {
        self.counts[w as usize]
    }
}
