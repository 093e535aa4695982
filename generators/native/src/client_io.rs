//! `swell-gen run`'s sockets and the bookkeeping of its responses.
//!
//! A connection's responses come back in request order on one stream; when a
//! request left before the previous response was in (an `early` request), one
//! read can end one response and begin the next, so the bytes read are dealt
//! out over the responses outstanding, front first ([`take_responses`]).

use std::collections::VecDeque;
use std::net::SocketAddr;

use mio::net::{TcpStream, UdpSocket};

use crate::schedule::Proto;
use crate::util::*;

pub enum Sock {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

pub enum Step {
    Blocked,
    Again,
    /// a request written, or one or more responses in
    Complete,
    Failed(String),
}

pub enum OpenError {
    NoFds,
    Other(String),
}

/// The datagrams a paced UDP request of `req` bytes goes out as: the `asked` count,
/// at least what datagrams of `max` bytes need, at most what the 24-byte header in
/// each allows.
pub fn dgram_count(req: u64, asked: u32, max: usize) -> u64 {
    let most = (req / UDP_HDR as u64).max(1);
    let need = req.div_ceil(max as u64).min(most);
    (asked as u64).clamp(need, most)
}

pub fn open_sock(server: SocketAddr, local: SocketAddr, proto: Proto) -> Result<Sock, OpenError> {
    let udp = proto == Proto::Udp;
    let s = new_socket(&server, Some(local), udp).map_err(|e| {
        if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
            OpenError::NoFds
        } else {
            OpenError::Other(format!("socket/bind {local}: {e}"))
        }
    })?;
    match s.connect(&server.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(OpenError::Other(format!("connect {server}: {e}"))),
    }
    Ok(if udp {
        Sock::Udp(UdpSocket::from_std(s.into()))
    } else {
        Sock::Tcp(TcpStream::from_std(s.into()))
    })
}

/// Deal `n` bytes read out over the responses outstanding `rq` (pair, bytes), front
/// first; `recvd` is the front's bytes so far. Returns how many responses ended, or
/// an error when the bytes are more than every outstanding response asked.
pub fn take_responses(
    rq: &mut VecDeque<(usize, u64)>,
    recvd: &mut u64,
    n: u64,
) -> Result<usize, ()> {
    let (mut left, mut ended) = (n, 0usize);
    while left > 0 {
        let Some(&(_, rsp)) = rq.front() else {
            return Err(());
        };
        let take = left.min(rsp - *recvd);
        *recvd += take;
        left -= take;
        if *recvd == rsp {
            rq.pop_front();
            *recvd = 0;
            ended += 1;
        }
    }
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::{dgram_count, take_responses};
    use std::collections::VecDeque;

    #[test]
    fn a_read_ends_one_response_and_begins_the_next() {
        let mut rq: VecDeque<(usize, u64)> = [(0, 100), (1, 50), (2, 30)].into();
        let mut got = 0u64;
        assert_eq!(take_responses(&mut rq, &mut got, 60), Ok(0));
        assert_eq!((rq.len(), got), (3, 60));
        // the first's last 40, the second whole, 10 of the third
        assert_eq!(take_responses(&mut rq, &mut got, 100), Ok(2));
        assert_eq!((rq.front().copied(), got), (Some((2, 30)), 10));
        assert_eq!(take_responses(&mut rq, &mut got, 20), Ok(1));
        assert!(rq.is_empty() && got == 0);
        // a byte more than asked
        assert_eq!(take_responses(&mut rq, &mut got, 1), Err(()));
        let mut rq: VecDeque<(usize, u64)> = [(0, 10)].into();
        assert_eq!(take_responses(&mut rq, &mut got, 11), Err(()));
    }

    #[test]
    fn paced_requests_keep_their_count_within_what_the_bytes_allow() {
        assert_eq!(dgram_count(1000, 4, 1472), 4); // as asked
        assert_eq!(dgram_count(1000, 100, 1472), 41); // each datagram holds its header
        assert_eq!(dgram_count(5000, 2, 1472), 4); // none over 1,472 bytes
        assert_eq!(dgram_count(30, 3, 1472), 1);
        assert_eq!(dgram_count(24, 1, 1452), 1);
        // the equal split never makes a datagram smaller than the header
        for req in 24..4000u64 {
            for asked in 1..60u32 {
                let n = dgram_count(req, asked, 1472);
                let sizes: Vec<u64> = (0..n).map(|j| (j + 1) * req / n - j * req / n).collect();
                assert!(
                    sizes.iter().all(|&k| (24..=1472).contains(&k)),
                    "{req} {asked}"
                );
                assert_eq!(sizes.iter().sum::<u64>(), req);
            }
        }
    }
}
