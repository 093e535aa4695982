//! Streaming pcap/pcapng reader (work in progress by the reader owner).
