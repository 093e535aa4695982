//! A TPACKET_V2 receive ring: the kernel copies each frame straight into a
//! buffer shared with the engine (mmap), where the engine reads it.
//!
//! Why: with a plain socket every received frame costs a clone of the skb in
//! `packet_rcv`, a queue and dequeue, one `recvmmsg` message with two control
//! messages, and a checked copy to user space (`copy_to_iter` plus hardened
//! usercopy checks), all on the forwarding thread: about 30% of the busier
//! thread's time in the bench's no-delay run. With the ring the one copy is
//! made by the kernel on the producing side (`tpacket_rcv`, no clone), and the
//! engine only reads frames whose status word says they are the user's, then
//! hands the slot back by writing `TP_STATUS_KERNEL`.
//!
//! The frames are filled strictly in ring order, so the reader walks from its
//! head and stops at the first slot still owned by the kernel. A full ring
//! drops the frame in the kernel and counts it in `PACKET_STATISTICS`
//! (`kernel_drops`), as a full socket buffer did. Each slot holds the
//! `tpacket2_hdr` (lengths, status, receive time), the `sockaddr_ll` (packet
//! type), and the frame at `tp_mac`; the slot is large enough for `SNAP`
//! (2048) bytes, so a longer frame arrives cut (`tp_snaplen < tp_len`) and is
//! counted as truncated.

use std::os::fd::RawFd;
use std::sync::atomic::{fence, Ordering};

const TPACKET_V2: libc::c_int = 1;

/// Slot size: the V2 header and sockaddr_ll (the frame starts at offset 66 for
/// Ethernet) plus SNAP bytes, rounded up to the 16-byte TPACKET alignment.
const FRAME_SIZE: usize = 2176;
/// 128 KB blocks (32 pages, one allocation each) of 60 slots.
const BLOCK_SIZE: usize = 1 << 17;
const FRAMES_PER_BLOCK: usize = BLOCK_SIZE / FRAME_SIZE;
/// 128 blocks: 7680 slots, 16 MB per receiving port (the plain socket's
/// 32 MB buffer held about 14k frames of 1514 bytes at their true size).
const BLOCKS: usize = 128;

/// One received frame, borrowed from its ring slot until `RxRing::release`.
pub struct Slot<'a> {
    pub data: &'a [u8],
    /// the frame's original length (more than `data.len()` if it was cut)
    pub len: usize,
    /// the kernel's receive time, CLOCK_REALTIME ns
    pub stamp: i128,
    /// the L4 checksum was left to (absent) hardware (TP_STATUS_CSUMNOTREADY)
    pub csum_not_ready: bool,
    /// sll_pkttype (PACKET_HOST, PACKET_OUTGOING, ...)
    pub pkttype: u8,
}

pub struct RxRing {
    base: *mut u8,
    head: usize,
}

fn setsockopt_raw<T>(fd: RawFd, opt: libc::c_int, val: &T) -> Result<(), String> {
    // SAFETY: passes a pointer to a live T of its own size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(format!(
            "setsockopt(SOL_PACKET, {opt}): {}",
            std::io::Error::last_os_error()
        ))
    }
}

impl RxRing {
    /// Switches the (bound, not yet read) packet socket `fd` to TPACKET_V2 and
    /// maps its receive ring.
    pub fn new(fd: RawFd) -> Result<RxRing, String> {
        setsockopt_raw(fd, libc::PACKET_VERSION, &TPACKET_V2)?;
        let req = libc::tpacket_req {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: BLOCKS as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (BLOCKS * FRAMES_PER_BLOCK) as u32,
        };
        setsockopt_raw(fd, libc::PACKET_RX_RING, &req)?;
        // SAFETY: maps the ring the kernel just allocated for this socket.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BLOCK_SIZE * BLOCKS,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!("mmap rx ring: {}", std::io::Error::last_os_error()));
        }
        Ok(RxRing {
            base: base.cast(),
            head: 0,
        })
    }

    fn header(&self, i: usize) -> *mut libc::tpacket2_hdr {
        let off = (i / FRAMES_PER_BLOCK) * BLOCK_SIZE + (i % FRAMES_PER_BLOCK) * FRAME_SIZE;
        // SAFETY: i < BLOCKS * FRAMES_PER_BLOCK, so the offset is inside the mapping.
        unsafe { self.base.add(off).cast() }
    }

    /// The frame at the head, if the kernel has handed it to user space.
    pub fn peek(&self) -> Option<Slot<'_>> {
        let h = self.header(self.head);
        // SAFETY: h points to a slot header in the mapping; the status word is
        // written by the kernel, so it is read volatile, and the acquire fence
        // orders the reads of the slot after it.
        unsafe {
            let status = std::ptr::read_volatile(&(*h).tp_status);
            if status & libc::TP_STATUS_USER == 0 {
                return None;
            }
            fence(Ordering::Acquire);
            let slot = h.cast::<u8>();
            let sll = slot
                .add(libc::TPACKET_ALIGN(size_of::<libc::tpacket2_hdr>()))
                .cast::<libc::sockaddr_ll>();
            let mac = usize::from((*h).tp_mac);
            let snap = ((*h).tp_snaplen as usize).min(FRAME_SIZE.saturating_sub(mac));
            Some(Slot {
                data: std::slice::from_raw_parts(slot.add(mac), snap),
                len: (*h).tp_len as usize,
                stamp: i128::from((*h).tp_sec) * 1_000_000_000 + i128::from((*h).tp_nsec),
                csum_not_ready: status & libc::TP_STATUS_CSUMNOTREADY != 0,
                pkttype: (*sll).sll_pkttype,
            })
        }
    }

    /// Hands the head slot back to the kernel and moves to the next one.
    pub fn release(&mut self) {
        let h = self.header(self.head);
        // SAFETY: as in peek; the release fence orders our reads of the slot
        // before the kernel may reuse it.
        unsafe {
            fence(Ordering::Release);
            std::ptr::write_volatile(&mut (*h).tp_status, libc::TP_STATUS_KERNEL);
        }
        self.head = (self.head + 1) % (BLOCKS * FRAMES_PER_BLOCK);
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in new.
        unsafe { libc::munmap(self.base.cast(), BLOCK_SIZE * BLOCKS) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::SNAP;

    #[test]
    fn slots_fit_a_full_snap_and_tile_blocks() {
        // the frame starts at TPACKET_ALIGN(hdrlen + 16) - 14 for Ethernet
        let hdrlen = libc::TPACKET2_HDRLEN;
        let macoff = ((hdrlen + 16 + 15) & !15) - 14;
        assert!(macoff + SNAP <= FRAME_SIZE);
        assert_eq!(FRAME_SIZE % 16, 0);
        assert!(FRAMES_PER_BLOCK * FRAME_SIZE <= BLOCK_SIZE);
        assert_eq!(BLOCK_SIZE % 4096, 0);
    }
}
