//! A port: one AF_PACKET socket bound to an interface inside some network
//! namespace. The socket is opened after `setns` into that namespace and the
//! thread returns to its own namespace at once; a socket keeps working in the
//! namespace it was created in.
//!
//! Reception reads a TPACKET_V2 ring shared with the kernel (`ring.rs`),
//! transmission is batched with `sendmmsg` from a per-port queue flushed once
//! per loop turn. Frames the engine sent itself are filtered by
//! `PACKET_IGNORE_OUTGOING` (and the `PACKET_OUTGOING` packet type as a
//! fallback). `PACKET_QDISC_BYPASS` hands frames straight to the veth driver.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::{parse_ipv4, parse_mac, PortConf};
use crate::ring::RxRing;

pub const SNAP: usize = 2048;
pub const BATCH: usize = 64;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_QDISC_BYPASS: libc::c_int = 20;

/// Upper bounds (us) of the transmit-lateness buckets; the last bucket is open.
pub const LATE_BUCKETS_US: [u64; 8] = [10, 20, 50, 100, 200, 500, 1_000, 10_000];

/// The JSON name of transmit-lateness bucket `i` ("<10", "10-20", ..., ">=10000").
pub fn late_bucket_name(i: usize) -> String {
    match i {
        0 => format!("<{}", LATE_BUCKETS_US[0]),
        i if i == LATE_BUCKETS_US.len() => format!(">={}", LATE_BUCKETS_US[i - 1]),
        i => format!("{}-{}", LATE_BUCKETS_US[i - 1], LATE_BUCKETS_US[i]),
    }
}

#[derive(Default, Debug, Clone)]
pub struct PortCounters {
    pub rx_frames: u64,
    pub rx_ipv4: u64,
    pub rx_ipv6: u64,
    pub rx_arp: u64,
    pub rx_other: u64,
    pub rx_truncated: u64,
    pub rx_csum_fixed: u64,
    pub arp_requests: u64,
    pub tx_unknown_peer: u64,
    pub arp_replies: u64,
    pub tx_frames: u64,
    pub tx_errors: u64,
    /// Frames by how late they were handed to the kernel after their scheduled
    /// departure, in the buckets of `LATE_BUCKETS_US` (the emulation's own timing error).
    pub tx_late: [u64; LATE_BUCKETS_US.len() + 1],
    pub no_route: u64,
    pub kernel_drops: u64,
}

pub struct Port {
    pub name: String,
    pub fd: RawFd,
    /// Whether this port's socket receives (false: transmit-only).
    pub rx: bool,
    pub mac: [u8; 6],
    /// The host side's MAC, shared by the shards' copies of this port
    /// (0: unknown; else the MAC in the low 48 bits with bit 48 set).
    peer: Arc<AtomicU64>,
    pub learn_peer: bool,
    /// When the last ARP request for the unknown peer went out (monotonic ns).
    pub last_arp_request: u64,
    pub gateways: Vec<u32>,
    pub counters: PortCounters,
    /// Frames waiting for the next `flush`.
    pub txq: Vec<Vec<u8>>,
    /// The scheduled departures (monotonic ns) of the forwarded frames in `txq`
    /// (not of ARP frames): `flush` counts how late each went out.
    pub txq_due: Vec<u64>,
    /// The receive ring (None for a transmit-only port).
    ring: Option<RxRing>,
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, val: libc::c_int) -> bool {
    // SAFETY: passes a pointer to a live c_int of the stated size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

fn open_ns(path: &str) -> Result<RawFd, String> {
    let c = CString::new(path).map_err(|_| format!("bad path {path:?}"))?;
    // SAFETY: c is a valid NUL-terminated string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(os_err(path));
    }
    Ok(fd)
}

/// Runs `f` inside the network namespace at `path`, then returns to the current one.
fn in_netns<T>(path: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    let home = open_ns("/proc/thread-self/ns/net")?;
    let target = open_ns(path)?;
    // SAFETY: both fds are namespace files opened above.
    let entered = unsafe { libc::setns(target, libc::CLONE_NEWNET) } == 0;
    let res = if entered {
        f()
    } else {
        Err(os_err(&format!("setns {path}")))
    };
    // SAFETY: as above; failing to return home would leave later ports in the wrong netns.
    let back = unsafe { libc::setns(home, libc::CLONE_NEWNET) } == 0;
    unsafe {
        libc::close(target);
        libc::close(home);
    }
    if !back {
        return Err(os_err("setns back to the engine's namespace"));
    }
    res
}

fn interface_mac(fd: RawFd, ifname: &str) -> Result<[u8; 6], String> {
    // SAFETY: ifreq is plain data; the name fits (checked) and ioctl fills ifr_hwaddr.
    unsafe {
        let mut req: libc::ifreq = zeroed();
        let name = ifname.as_bytes();
        if name.len() >= req.ifr_name.len() {
            return Err(format!("interface name too long: {ifname}"));
        }
        for (i, b) in name.iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(fd, libc::SIOCGIFHWADDR, &mut req) < 0 {
            return Err(os_err(&format!("SIOCGIFHWADDR {ifname}")));
        }
        let mut mac = [0u8; 6];
        for (i, m) in mac.iter_mut().enumerate() {
            *m = req.ifr_ifru.ifru_hwaddr.sa_data[i] as u8;
        }
        Ok(mac)
    }
}

/// A socket on `conf`'s interface with its receive ring; with `rx` false it
/// is bound to protocol 0, receives nothing and has no ring (a transmit-only
/// socket for another thread). The socket is made with protocol 0 and gets
/// its protocol at `bind`, after the ring is set up, so no frame is queued
/// outside the ring.
fn open_socket(conf: &PortConf, rx: bool) -> Result<(RawFd, [u8; 6], Option<RxRing>), String> {
    let proto = if rx {
        (libc::ETH_P_ALL as u16).to_be() as libc::c_int
    } else {
        0
    };
    // SAFETY: plain socket call.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(os_err("socket(AF_PACKET)"));
    }
    let name = CString::new(conf.ifname.as_str()).map_err(|_| "bad ifname".to_string())?;
    // SAFETY: name is NUL-terminated.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        unsafe { libc::close(fd) };
        return Err(format!("no interface {} in {}", conf.ifname, conf.netns));
    }
    let mac = interface_mac(fd, &conf.ifname)?;
    let ring = if rx {
        // the kernel's receive time in each slot; SO_TIMESTAMPNS also makes
        // the kernel stamp frames as they enter the stack rather than at the copy
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        setsockopt_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        match RxRing::new(fd) {
            Ok(r) => Some(r),
            Err(e) => {
                // SAFETY: fd is the socket opened above, not used after this.
                unsafe { libc::close(fd) };
                return Err(format!("{} in {}: {e}", conf.ifname, conf.netns));
            }
        }
    } else {
        None
    };
    // SAFETY: sockaddr_ll is plain data, bound with its own size.
    let bound = unsafe {
        let mut sll: libc::sockaddr_ll = zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto as u16;
        sll.sll_ifindex = ifindex as i32;
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if bound < 0 {
        let err = os_err(&format!("bind {}", conf.ifname));
        drop(ring);
        // SAFETY: fd is the socket opened above, not used after this.
        unsafe { libc::close(fd) };
        return Err(err);
    }
    setsockopt_int(fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20);
    Ok((fd, mac, ring))
}

/// Internet checksum accumulation over `data` (big-endian 16-bit words).
fn sum16(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Completes the TCP/UDP checksum of an Ethernet+IPv4 or IPv6 frame whose
/// sender left it to (absent) hardware: the frame would be dropped by the
/// receiver otherwise. IPv6: only a TCP/UDP header right after the fixed
/// header (no extension headers), which is what a local stack sends.
pub fn fix_l4_checksum(frame: &mut [u8]) {
    if frame.len() >= 54 && frame[12..14] == [0x86, 0xdd] {
        let len = usize::from(u16::from_be_bytes([frame[18], frame[19]]));
        let proto = frame[20];
        if 54 + len <= frame.len() {
            let pseudo = sum16(0, &frame[22..54]);
            write_l4_checksum(frame, 54, len, proto, pseudo);
        }
        return;
    }
    if frame.len() < 34 || frame[12..14] != [8, 0] {
        return;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let proto = frame[23];
    if ihl < 20 || total < ihl || 14 + total > frame.len() {
        return;
    }
    let pseudo = sum16(0, &frame[26..34]);
    write_l4_checksum(frame, 14 + ihl, total - ihl, proto, pseudo);
}

/// Writes the TCP/UDP checksum of the `len`-byte segment at `l4`; `pseudo` is
/// the sum over the pseudo-header's addresses (protocol and length added here).
fn write_l4_checksum(frame: &mut [u8], l4: usize, len: usize, proto: u8, pseudo: u64) {
    let off = match proto {
        6 => 16,
        17 => 6,
        _ => return,
    };
    if len < off + 2 {
        return;
    }
    frame[l4 + off] = 0;
    frame[l4 + off + 1] = 0;
    let acc = pseudo + u64::from(proto) + len as u64;
    let mut c = fold(sum16(acc, &frame[l4..l4 + len]));
    if c == 0 && proto == 17 {
        c = 0xffff;
    }
    frame[l4 + off..l4 + off + 2].copy_from_slice(&c.to_be_bytes());
}

fn mac_word(m: [u8; 6]) -> u64 {
    let mut w = [0u8; 8];
    w[2..].copy_from_slice(&m);
    u64::from_be_bytes(w) | 1 << 48
}

impl Port {
    /// The host side's MAC, if configured or learnt.
    pub fn peer_mac(&self) -> Option<[u8; 6]> {
        let w = self.peer.load(Ordering::Relaxed);
        (w != 0).then(|| {
            let b = w.to_be_bytes();
            [b[2], b[3], b[4], b[5], b[6], b[7]]
        })
    }

    pub fn learn_peer_mac(&self, mac: [u8; 6]) {
        self.peer.store(mac_word(mac), Ordering::Relaxed);
    }

    /// Opens the port. The engine answers ARP and sends with a MAC one bit
    /// away from the interface's own: frames for it are "other host" to the
    /// router namespace's kernel, which then drops them at once instead of
    /// routing each one (the engine's socket still sees them). With `rx`
    /// false the port only transmits (see `open_socket`).
    pub fn open(conf: &PortConf, rx: bool, peer: Arc<AtomicU64>) -> Result<Port, String> {
        let (fd, if_mac, ring) = in_netns(&conf.netns, || open_socket(conf, rx))?;
        let peer_mac = conf.peer_mac.as_deref().map(parse_mac).transpose()?;
        if let Some(m) = peer_mac {
            peer.store(mac_word(m), Ordering::Relaxed);
        }
        let mut mac = if_mac;
        mac[5] ^= 0x01;
        if Some(mac) == peer_mac {
            mac[5] ^= 0x03;
        }
        let gateways = conf
            .gateway_ips
            .iter()
            .map(|g| parse_ipv4(g))
            .collect::<Result<_, _>>()?;
        Ok(Port {
            name: conf.name.clone(),
            fd,
            rx,
            mac,
            learn_peer: peer_mac.is_none(),
            last_arp_request: 0,
            peer,
            gateways,
            counters: PortCounters::default(),
            txq: Vec::with_capacity(BATCH),
            txq_due: Vec::with_capacity(BATCH),
            ring,
        })
    }

    /// Receives up to one batch from the ring, copied into buffers from
    /// `pool` and appended to `out` with the kernel's receive time
    /// (CLOCK_REALTIME ns); frames the engine sent itself and truncated frames
    /// are left out. Returns the number of frames the kernel handed over.
    pub fn recv_batch(&mut self, pool: &mut Vec<Vec<u8>>, out: &mut Vec<(Vec<u8>, i128)>) -> usize {
        let Some(ring) = self.ring.as_mut() else {
            return 0;
        };
        let mut n = 0;
        while n < BATCH {
            let Some(slot) = ring.peek() else { break };
            n += 1;
            if slot.pkttype != libc::PACKET_OUTGOING {
                self.counters.rx_frames += 1;
                if slot.len > SNAP || slot.data.len() < slot.len {
                    self.counters.rx_truncated += 1;
                } else {
                    let mut b = pool.pop().unwrap_or_else(|| Vec::with_capacity(SNAP));
                    b.clear();
                    b.extend_from_slice(slot.data);
                    if slot.csum_not_ready {
                        self.counters.rx_csum_fixed += 1;
                        fix_l4_checksum(&mut b);
                    }
                    out.push((b, slot.stamp));
                }
            }
            ring.release();
        }
        n
    }

    /// Sends every queued frame; returns the buffers for reuse.
    pub fn flush(&mut self, pool: &mut Vec<Vec<u8>>) {
        if !self.txq_due.is_empty() {
            let now = crate::engine::mono_ns();
            for &due in &self.txq_due {
                let late_us = now.saturating_sub(due) / 1_000;
                let i = LATE_BUCKETS_US
                    .iter()
                    .position(|&b| late_us < b)
                    .unwrap_or(LATE_BUCKETS_US.len());
                self.counters.tx_late[i] += 1;
            }
            self.txq_due.clear();
        }
        let mut done = 0;
        while done < self.txq.len() {
            let chunk = &self.txq[done..(done + BATCH).min(self.txq.len())];
            // SAFETY: iovecs point into frames of txq that live through the call.
            let sent = unsafe {
                let mut iov: [libc::iovec; BATCH] = zeroed();
                let mut msgs: [libc::mmsghdr; BATCH] = zeroed();
                for (i, frame) in chunk.iter().enumerate() {
                    iov[i].iov_base = frame.as_ptr() as *mut libc::c_void;
                    iov[i].iov_len = frame.len();
                    msgs[i].msg_hdr.msg_iov = &mut iov[i];
                    msgs[i].msg_hdr.msg_iovlen = 1;
                }
                libc::sendmmsg(self.fd, msgs.as_mut_ptr(), chunk.len() as u32, 0)
            };
            if sent <= 0 {
                // the first frame of the chunk failed (e.g. ENOBUFS): count it, move on
                self.counters.tx_errors += 1;
                done += 1;
            } else {
                self.counters.tx_frames += sent as u64;
                done += sent as usize;
            }
        }
        pool.append(&mut self.txq);
    }

    /// The kernel's count of frames it dropped before the engine read them.
    pub fn poll_kernel_drops(&mut self) {
        // SAFETY: tpacket_stats is plain data of the stated size.
        unsafe {
            let mut st: libc::tpacket_stats = zeroed();
            let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
            if libc::getsockopt(
                self.fd,
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            ) == 0
            {
                // reading resets the kernel's counters; accumulate
                self.counters.kernel_drops += u64::from(st.tp_drops);
            }
        }
    }

    /// An ARP request for `ip` from this port (sender: its first gateway
    /// address, or 0.0.0.0), sent while the host-side MAC is unknown; the reply
    /// teaches the engine the peer's MAC.
    pub fn arp_request(&self, ip: u32) -> Vec<u8> {
        let mut r = vec![0u8; 42];
        r[0..6].copy_from_slice(&[0xff; 6]);
        r[6..12].copy_from_slice(&self.mac);
        r[12..14].copy_from_slice(&[8, 6]);
        r[14..20].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
        r[20..22].copy_from_slice(&[0, 1]);
        r[22..28].copy_from_slice(&self.mac);
        r[28..32].copy_from_slice(&self.gateways.first().copied().unwrap_or(0).to_be_bytes());
        r[38..42].copy_from_slice(&ip.to_be_bytes());
        r
    }

    /// An ARP reply if `frame` asks for one of this port's gateway addresses.
    pub fn arp_reply(&self, frame: &[u8]) -> Option<Vec<u8>> {
        if frame.len() < 42 || frame[20..22] != [0, 1] || frame[16..18] != [8, 0] {
            return None;
        }
        let target = u32::from_be_bytes([frame[38], frame[39], frame[40], frame[41]]);
        if !self.gateways.contains(&target) {
            return None;
        }
        let mut r = vec![0u8; 42];
        r[0..6].copy_from_slice(&frame[22..28]);
        r[6..12].copy_from_slice(&self.mac);
        r[12..14].copy_from_slice(&[8, 6]);
        r[14..20].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
        r[20..22].copy_from_slice(&[0, 2]);
        r[22..28].copy_from_slice(&self.mac);
        r[28..32].copy_from_slice(&frame[38..42]);
        r[32..42].copy_from_slice(&frame[22..32]);
        Some(r)
    }
}

// SAFETY: the ring's raw pointer is into this port's own mapping; a port
// moves to its shard's thread once and is never shared.
unsafe impl Send for Port {}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: the fd is owned by this port.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port() -> Port {
        Port {
            name: "p".into(),
            fd: -1,
            rx: true,
            mac: [2, 0, 0, 0, 0, 1],
            peer: Arc::new(AtomicU64::new(0)),
            learn_peer: true,
            last_arp_request: 0,
            gateways: vec![0x0a01_fffe],
            counters: PortCounters::default(),
            txq: Vec::new(),
            txq_due: Vec::new(),
            ring: None,
        }
    }

    #[test]
    fn flush_counts_each_forwarded_frame_by_its_lateness() {
        let mut p = port();
        let now = crate::engine::mono_ns();
        for late_us in [0u64, 150, 150, 2_000_000] {
            p.txq.push(vec![0u8; 60]);
            p.txq_due.push(now.saturating_sub(late_us * 1_000));
        }
        p.txq.push(vec![0u8; 42]); // an ARP frame: no departure, not counted
        let mut pool = Vec::new();
        p.flush(&mut pool);
        let names: Vec<String> = (0..=LATE_BUCKETS_US.len()).map(late_bucket_name).collect();
        assert_eq!(names[0], "<10");
        assert_eq!(names[4], "100-200");
        assert_eq!(names[8], ">=10000");
        assert_eq!(p.counters.tx_late.iter().sum::<u64>(), 4);
        assert_eq!(p.counters.tx_late[4], 2);
        assert_eq!(p.counters.tx_late[8], 1);
        assert!(p.txq.is_empty() && p.txq_due.is_empty());
    }

    #[test]
    fn completes_udp_and_tcp_checksums() {
        // a UDP datagram 10.0.0.1:1000 -> 10.0.0.2:2000, payload "hi", bogus checksum
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[8, 0]);
        f.extend_from_slice(&[
            0x45, 0, 0, 30, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&[0x03, 0xe8, 0x07, 0xd0, 0, 10, 0x12, 0x34, b'h', b'i']);
        fix_l4_checksum(&mut f);
        // verify: the sum over pseudo-header + segment with the checksum in place folds to 0
        let acc = sum16(sum16(0, &f[26..34]) + 17 + 10, &f[34..44]);
        assert_eq!(fold(acc), 0);
        f[23] = 6; // as TCP the field sits at offset 16: too short, left alone
        let before = f.clone();
        fix_l4_checksum(&mut f);
        assert_eq!(f, before);
    }

    #[test]
    fn completes_udp_checksum_over_ipv6() {
        // UDP fd00::1:1000 -> fd00::2:2000, payload "hi", bogus checksum
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 10, 17, 64]);
        let (a, b) = (0xfd00_u128 << 112 | 1, 0xfd00_u128 << 112 | 2);
        f.extend_from_slice(&a.to_be_bytes());
        f.extend_from_slice(&b.to_be_bytes());
        f.extend_from_slice(&[0x03, 0xe8, 0x07, 0xd0, 0, 10, 0x12, 0x34, b'h', b'i']);
        fix_l4_checksum(&mut f);
        assert_ne!(&f[60..62], &[0x12, 0x34]);
        let acc = sum16(sum16(0, &f[22..54]) + 17 + 10, &f[54..64]);
        assert_eq!(fold(acc), 0);
        // a payload length past the frame's end is left alone
        f[19] = 200;
        let before = f.clone();
        fix_l4_checksum(&mut f);
        assert_eq!(f, before);
    }

    #[test]
    fn peer_mac_cell_round_trips() {
        let p = port();
        assert_eq!(p.peer_mac(), None);
        p.learn_peer_mac([0, 0, 0, 0, 0, 0]);
        assert_eq!(p.peer_mac(), Some([0; 6]));
        p.learn_peer_mac([0xfe, 1, 2, 3, 4, 0xff]);
        assert_eq!(p.peer_mac(), Some([0xfe, 1, 2, 3, 4, 0xff]));
    }

    #[test]
    fn answers_arp_for_gateway_only() {
        let mut req = vec![0xffu8; 6];
        req.extend_from_slice(&[2, 0, 0, 0, 0, 9, 8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
        req.extend_from_slice(&[2, 0, 0, 0, 0, 9, 10, 1, 0, 5]); // sender mac, ip
        req.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 1, 255, 254]); // target
        let p = port();
        let r = p.arp_reply(&req).unwrap();
        assert_eq!(&r[0..6], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(&r[20..22], &[0, 2]);
        assert_eq!(&r[28..32], &[10, 1, 255, 254]);
        assert_eq!(&r[38..42], &[10, 1, 0, 5]);
        req[41] = 1;
        assert!(p.arp_reply(&req).is_none());
    }
}
