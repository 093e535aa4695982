//! Packet dissection: link layer -> IPv4/IPv6 (extension headers skipped) -> TCP/UDP/ICMP.
//!
//! Every length is checked before it is read, so any byte string is safe
//! input. Sizes come from the headers, not from the captured length: the IP
//! total length and the TCP data offset give the true payload even when a
//! capture kept only the first 52 bytes of each packet.

use crate::warn::Warn;

/// One packet's decoded fields (the columns of a chunk, minus the record's own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub ipver: u8,
    pub proto: u8,
    pub frag: u8,
    pub saddr_hi: u64,
    pub saddr_lo: u64,
    pub daddr_hi: u64,
    pub daddr_lo: u64,
    pub sport: u16,
    pub dport: u16,
    pub tcp_flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
    pub ip_len: u32,
    pub payload_len: u32,
    pub vlan: u16,
    pub l4_ok: bool,
}

pub const FRAG_ANY: u8 = 1;
pub const FRAG_FIRST: u8 = 2;
pub const FRAG_LATER: u8 = 4;

const ET_IPV4: u16 = 0x0800;
const ET_IPV6: u16 = 0x86dd;
const V4_MAPPED: u64 = 0x0000_ffff_0000_0000;

#[inline]
fn be16(d: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([d[o], d[o + 1]])
}

#[inline]
fn be32(d: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}

#[inline]
fn be64(d: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[o..o + 8]);
    u64::from_be_bytes(b)
}

/// Link types this dissector understands.
pub fn linktype_known(linktype: u16) -> bool {
    matches!(
        linktype,
        0 | 1 | 12 | 14 | 101 | 108 | 113 | 228 | 229 | 276
    )
}

/// Decode one packet. Returns the first anomaly met (if any) for counting.
pub fn dissect(d: &[u8], linktype: u16, wirelen: u32, row: &mut Row) -> Option<Warn> {
    let (et, off) = match link(d, linktype, row).and_then(|(et, off)| encap(d, et, off)) {
        Ok(x) => x,
        Err(w) => return Some(w),
    };
    let frame_rest = (wirelen as usize).saturating_sub(off);
    match et {
        ET_IPV4 => ipv4(d, off, frame_rest, row),
        ET_IPV6 => ipv6(d, off, frame_rest, row),
        _ => Some(Warn::NonIp),
    }
}

/// Strip the link header: the ethertype of what follows and its offset.
fn link(d: &[u8], linktype: u16, row: &mut Row) -> Result<(u16, usize), Warn> {
    match linktype {
        1 => {
            if d.len() < 14 {
                return Err(Warn::ShortPacket);
            }
            vlan_tags(d, 12, row)
        }
        113 => {
            if d.len() < 16 {
                return Err(Warn::ShortPacket);
            }
            vlan_tags(d, 14, row)
        }
        276 => {
            if d.len() < 20 {
                return Err(Warn::ShortPacket);
            }
            let et = be16(d, 0);
            if matches!(et, 0x8100 | 0x88a8 | 0x9100 | 0x9200) {
                vlan_after(d, 20, row)
            } else {
                Ok((et, 20))
            }
        }
        12 | 14 | 101 => match d.first() {
            None => Err(Warn::ShortPacket),
            Some(b) if b >> 4 == 4 => Ok((ET_IPV4, 0)),
            Some(b) if b >> 4 == 6 => Ok((ET_IPV6, 0)),
            Some(_) => Err(Warn::NonIp),
        },
        228 => Ok((ET_IPV4, 0)),
        229 => Ok((ET_IPV6, 0)),
        0 | 108 => {
            if d.len() < 4 {
                return Err(Warn::ShortPacket);
            }
            let b = [d[0], d[1], d[2], d[3]];
            // DLT_NULL is in the capturing host's byte order; DLT_LOOP is big-endian.
            let fams = if linktype == 0 {
                [u32::from_le_bytes(b), u32::from_be_bytes(b)]
            } else {
                [u32::from_be_bytes(b); 2]
            };
            if fams.contains(&2) {
                Ok((ET_IPV4, 4))
            } else if fams.iter().any(|f| matches!(f, 10 | 23 | 24 | 28 | 30)) {
                Ok((ET_IPV6, 4))
            } else {
                Err(Warn::NonIp)
            }
        }
        _ => Err(Warn::UnknownLinktype),
    }
}

/// Unwrap PPPoE sessions and MPLS label stacks to the IP packet inside.
fn encap(d: &[u8], et: u16, mut off: usize) -> Result<(u16, usize), Warn> {
    match et {
        0x8864 => {
            if d.len() < off + 8 {
                return Err(Warn::ShortPacket);
            }
            match be16(d, off + 6) {
                0x0021 => Ok((ET_IPV4, off + 8)),
                0x0057 => Ok((ET_IPV6, off + 8)),
                _ => Err(Warn::NonIp),
            }
        }
        0x8847 | 0x8848 => {
            for _ in 0..16 {
                if d.len() < off + 4 {
                    return Err(Warn::ShortPacket);
                }
                let bottom = d[off + 2] & 1 != 0;
                off += 4;
                if bottom {
                    return match d.get(off).map(|b| b >> 4) {
                        None => Err(Warn::ShortPacket),
                        Some(4) => Ok((ET_IPV4, off)),
                        Some(6) => Ok((ET_IPV6, off)),
                        Some(_) => Err(Warn::NonIp),
                    };
                }
            }
            Err(Warn::NonIp)
        }
        _ => Ok((et, off)),
    }
}

/// Read the ethertype at `et_off`, skipping 802.1Q/802.1ad tags (outer id kept).
fn vlan_tags(d: &[u8], et_off: usize, row: &mut Row) -> Result<(u16, usize), Warn> {
    let et = be16(d, et_off);
    if matches!(et, 0x8100 | 0x88a8 | 0x9100 | 0x9200) {
        vlan_after(d, et_off + 2, row)
    } else {
        Ok((et, et_off + 2))
    }
}

/// Tags start at `off` (TCI then next ethertype), at most 8 of them.
fn vlan_after(d: &[u8], mut off: usize, row: &mut Row) -> Result<(u16, usize), Warn> {
    for _ in 0..8 {
        if d.len() < off + 4 {
            return Err(Warn::ShortPacket);
        }
        if row.vlan == 0 {
            row.vlan = be16(d, off) & 0x0fff;
        }
        let et = be16(d, off + 2);
        off += 4;
        if !matches!(et, 0x8100 | 0x88a8 | 0x9100 | 0x9200) {
            return Ok((et, off));
        }
    }
    Err(Warn::NonIp)
}

fn ipv4(d: &[u8], off: usize, frame_rest: usize, row: &mut Row) -> Option<Warn> {
    row.ipver = 4;
    if d.len() < off + 20 {
        return Some(Warn::ShortPacket);
    }
    let h = &d[off..];
    let ihl = ((h[0] & 0x0f) as usize) * 4;
    row.saddr_lo = V4_MAPPED | be32(h, 12) as u64;
    row.daddr_lo = V4_MAPPED | be32(h, 16) as u64;
    row.proto = h[9];
    let mut total = be16(h, 2) as usize;
    if total == 0 {
        total = frame_rest; // segmentation offload: the length field is left 0
    }
    row.ip_len = total as u32;
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl {
        return Some(Warn::BadIpHeader);
    }
    let fo = be16(h, 6);
    let (more, foff) = (fo & 0x2000 != 0, fo & 0x1fff);
    let l4_total = total - ihl;
    if more || foff != 0 {
        row.frag = FRAG_ANY | if foff == 0 { FRAG_FIRST } else { FRAG_LATER };
    }
    let over = (total > frame_rest).then_some(Warn::IpLenExceedsFrame);
    if foff != 0 {
        row.payload_len = l4_total as u32;
        return over;
    }
    if d.len() < off + ihl {
        return Some(Warn::ShortPacket);
    }
    transport(&d[off + ihl..], row.proto, l4_total, row).or(over)
}

fn ipv6(d: &[u8], off: usize, frame_rest: usize, row: &mut Row) -> Option<Warn> {
    row.ipver = 6;
    if d.len() < off + 40 {
        return Some(Warn::ShortPacket);
    }
    let h = &d[off..];
    if h[0] >> 4 != 6 {
        return Some(Warn::BadIpHeader);
    }
    row.saddr_hi = be64(h, 8);
    row.saddr_lo = be64(h, 16);
    row.daddr_hi = be64(h, 24);
    row.daddr_lo = be64(h, 32);
    let mut plen = be16(h, 4) as usize;
    if plen == 0 {
        plen = frame_rest.saturating_sub(40); // jumbogram or offload
    }
    row.ip_len = (plen + 40) as u32;
    let over = (plen + 40 > frame_rest).then_some(Warn::IpLenExceedsFrame);
    let mut nh = h[6];
    let mut cur = 40usize;
    let mut rest = plen;
    for _ in 0..16 {
        let hl = match nh {
            0 | 43 | 60 | 135 | 139 | 140 | 44 | 51 => {
                let need = if nh == 44 { 8 } else { 2 };
                if h.len() < cur + need {
                    row.proto = nh;
                    return Some(Warn::ShortPacket);
                }
                match nh {
                    44 => 8,
                    51 => (h[cur + 1] as usize + 2) * 4,
                    _ => (h[cur + 1] as usize + 1) * 8,
                }
            }
            _ => break,
        };
        if nh == 44 {
            let fo = be16(h, cur + 2);
            let (foff, more) = (fo >> 3, fo & 1 != 0);
            if foff != 0 || more {
                row.frag = FRAG_ANY | if foff == 0 { FRAG_FIRST } else { FRAG_LATER };
            }
            if foff != 0 {
                row.proto = h[cur];
                row.payload_len = rest.saturating_sub(8) as u32;
                return over;
            }
        }
        if rest < hl {
            row.proto = nh;
            return Some(Warn::BadIpHeader);
        }
        nh = h[cur];
        cur += hl;
        rest -= hl;
    }
    row.proto = nh;
    if h.len() < cur {
        return Some(Warn::ShortPacket);
    }
    transport(&h[cur..], nh, rest, row).or(over)
}

/// `l4` is the captured transport bytes, `l4_total` their true length.
fn transport(l4: &[u8], proto: u8, l4_total: usize, row: &mut Row) -> Option<Warn> {
    match proto {
        6 => {
            if l4.len() >= 4 {
                row.sport = be16(l4, 0);
                row.dport = be16(l4, 2);
            }
            if l4.len() < 16 {
                row.payload_len = l4_total.saturating_sub(20) as u32;
                return Some(Warn::ShortPacket);
            }
            row.seq = be32(l4, 4);
            row.ack = be32(l4, 8);
            row.tcp_flags = l4[13];
            row.win = be16(l4, 14);
            row.l4_ok = true;
            let doff = ((l4[12] >> 4) as usize) * 4;
            if doff < 20 || doff > l4_total {
                row.payload_len = l4_total.saturating_sub(20) as u32;
                return Some(Warn::BadTcpHeader);
            }
            row.payload_len = (l4_total - doff) as u32;
            None
        }
        17 | 136 => {
            if l4.len() < 8 {
                row.sport = if l4.len() >= 2 { be16(l4, 0) } else { 0 };
                row.payload_len = l4_total.saturating_sub(8) as u32;
                return Some(Warn::ShortPacket);
            }
            row.sport = be16(l4, 0);
            row.dport = be16(l4, 2);
            row.l4_ok = true;
            row.payload_len = l4_total.saturating_sub(8) as u32;
            None
        }
        1 | 58 => {
            row.payload_len = l4_total.saturating_sub(8) as u32;
            row.l4_ok = l4.len() >= 8;
            (!row.l4_ok).then_some(Warn::ShortPacket)
        }
        _ => {
            row.payload_len = l4_total as u32;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth_ipv4_tcp(payload: usize, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 32 + payload) as u16;
        p.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            1,
            0x40,
            0,
            64,
            6,
            0,
            0,
        ]);
        p.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        p.extend_from_slice(&[
            0x30, 0x39, 0, 80, 0, 0, 0, 7, 0, 0, 0, 9, 0x80, flags, 0xff, 0xff,
        ]);
        p.extend_from_slice(&[0u8; 16]);
        p.extend(std::iter::repeat_n(0xab, payload));
        p
    }

    #[test]
    fn ethernet_tcp_and_header_only_capture() {
        let p = eth_ipv4_tcp(1000, 0x12);
        let mut r = Row::default();
        assert_eq!(dissect(&p, 1, p.len() as u32, &mut r), None);
        assert_eq!((r.ipver, r.proto, r.sport, r.dport), (4, 6, 12345, 80));
        assert_eq!((r.seq, r.ack, r.win, r.tcp_flags), (7, 9, 0xffff, 0x12));
        assert_eq!((r.ip_len, r.payload_len, r.l4_ok), (1052, 1000, true));
        assert_eq!(r.saddr_lo, V4_MAPPED | 0x0a00_0001);
        let mut cut = Row::default();
        assert_eq!(dissect(&p[..52], 1, p.len() as u32, &mut cut), None);
        assert_eq!(cut, r);
    }

    #[test]
    fn vlan_qinq_and_fragments() {
        let base = eth_ipv4_tcp(10, 2);
        let mut p = base[..12].to_vec();
        p.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8]);
        p.extend_from_slice(&base[12..]);
        p[28] = 0x20; // MF set, offset 0 -> first fragment
        let mut r = Row::default();
        assert_eq!(dissect(&p, 1, p.len() as u32, &mut r), None);
        assert_eq!((r.vlan, r.frag, r.dport), (100, FRAG_ANY | FRAG_FIRST, 80));
        p[28] = 0x00;
        p[29] = 0x10; // offset 16*8, last fragment
        let mut r = Row::default();
        assert_eq!(dissect(&p, 1, p.len() as u32, &mut r), None);
        assert_eq!(
            (r.frag, r.dport, r.payload_len, r.l4_ok),
            (FRAG_ANY | FRAG_LATER, 0, 42, false)
        );
    }

    #[test]
    fn pppoe_and_mpls() {
        let base = eth_ipv4_tcp(5, 0x18);
        let mut pppoe = base[..12].to_vec();
        pppoe.extend_from_slice(&[0x88, 0x64, 0x11, 0, 0, 1, 0, 0, 0x00, 0x21]);
        pppoe.extend_from_slice(&base[14..]);
        let mut mpls = base[..12].to_vec();
        mpls.extend_from_slice(&[0x88, 0x47, 0, 1, 0x00, 64, 0, 2, 0x01, 64]);
        mpls.extend_from_slice(&base[14..]);
        for p in [pppoe, mpls] {
            let mut r = Row::default();
            assert_eq!(dissect(&p, 1, p.len() as u32, &mut r), None);
            assert_eq!(
                (r.ipver, r.dport, r.payload_len, r.tcp_flags),
                (4, 80, 5, 0x18)
            );
        }
    }

    #[test]
    fn ipv6_extension_headers() {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0u8; 11]);
        p.push(1);
        p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        p.extend_from_slice(&[0u8; 11]);
        p.push(2);
        p.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]); // hop-by-hop -> dest opts
        p.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 0]); // dest opts -> UDP
        p.extend_from_slice(&[0, 53, 0x12, 0x34, 0, 20, 0, 0]);
        p.extend_from_slice(&[0u8; 12]);
        let plen = (p.len() - 40) as u16;
        p[4..6].copy_from_slice(&plen.to_be_bytes());
        let mut r = Row::default();
        assert_eq!(dissect(&p, 101, p.len() as u32, &mut r), None);
        assert_eq!(
            (r.ipver, r.proto, r.sport, r.dport, r.payload_len),
            (6, 17, 53, 0x1234, 12)
        );
        assert_eq!(r.saddr_hi, 0x2001_0db8_0000_0000);
        assert_eq!(r.saddr_lo, 1);
        assert_eq!(r.ip_len as usize, p.len());
    }

    #[test]
    fn link_types_and_short_packets() {
        let eth = eth_ipv4_tcp(0, 0x10);
        let ip = &eth[14..];
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&[0x08, 0x00]);
        sll.extend_from_slice(ip);
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend_from_slice(&[0u8; 18]);
        sll2.extend_from_slice(ip);
        let mut null = vec![2, 0, 0, 0];
        null.extend_from_slice(ip);
        let mut lo = vec![0, 0, 0, 2];
        lo.extend_from_slice(ip);
        for (lt, d) in [
            (113, &sll),
            (276, &sll2),
            (0, &null),
            (108, &lo),
            (12, &ip.to_vec()),
        ] {
            let mut r = Row::default();
            assert_eq!(
                dissect(d, lt, d.len() as u32, &mut r),
                None,
                "linktype {lt}"
            );
            assert_eq!(
                (r.ipver, r.dport, r.tcp_flags),
                (4, 80, 0x10),
                "linktype {lt}"
            );
        }
        let mut r = Row::default();
        assert_eq!(dissect(&eth[..20], 1, 80, &mut r), Some(Warn::ShortPacket));
        assert_eq!(
            dissect(&eth, 147, 80, &mut Row::default()),
            Some(Warn::UnknownLinktype)
        );
        assert_eq!(
            dissect(&[], 1, 0, &mut Row::default()),
            Some(Warn::ShortPacket)
        );
    }
}
