//! The engine's configuration: the JSON written by `swell.topologies.linkemu`
//! (`EngineConfig.to_json()`), already validated on the Python side; the
//! engine re-checks what it relies on and exits with a one-line error.

use serde::Deserialize;

#[derive(Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct LossSpec {
    #[serde(default = "none_kind")]
    pub kind: String,
    #[serde(default)]
    pub p: f64,
    #[serde(default)]
    pub p_gb: f64,
    #[serde(default)]
    pub p_bg: f64,
    #[serde(default)]
    pub loss_good: f64,
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn none_kind() -> String {
    "none".to_string()
}

fn one() -> f64 {
    1.0
}

#[derive(Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct PipeConf {
    #[serde(default)]
    pub rate_bps: Option<f64>,
    #[serde(default)]
    pub delay_us: u64,
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    #[serde(default)]
    pub queue_packets: Option<u64>,
    #[serde(default)]
    pub loss: LossSpec,
    /// Share of the packets queued right behind another that arrive together with
    /// it (link-layer aggregation or receive coalescing, `pipe.rs`); 0 = none.
    #[serde(default)]
    pub pairing: f64,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct PortConf {
    pub name: String,
    pub netns: String,
    pub ifname: String,
    #[serde(default)]
    pub peer_mac: Option<String>,
    #[serde(default)]
    pub gateway_ips: Vec<String>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct RouteConf {
    pub prefix: String,
    pub port: String,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct HostConf {
    pub ip: String,
    pub up: PipeConf,
    pub down: PipeConf,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub name: String,
    pub ports: Vec<PortConf>,
    pub routes: Vec<RouteConf>,
    #[serde(default)]
    pub hosts: Vec<HostConf>,
    /// (in_port, out_port, pipe)
    #[serde(default)]
    pub port_pipes: Vec<(String, String, PipeConf)>,
    /// (in_port, out_port, pcap path)
    #[serde(default)]
    pub captures: Vec<(String, String, String)>,
    #[serde(default)]
    pub stats_path: Option<String>,
    #[serde(default = "hundred")]
    pub stats_interval_ms: u64,
    #[serde(default = "one_u64")]
    pub seed: u64,
}

fn hundred() -> u64 {
    100
}

fn one_u64() -> u64 {
    1
}

pub fn parse_ipv4(s: &str) -> Result<u32, String> {
    s.parse::<std::net::Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| format!("bad IPv4 address {s:?}"))
}

/// An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`): one key space for both families.
pub fn v4_mapped(a: u32) -> u128 {
    0xffff_u128 << 32 | u128::from(a)
}

/// An IPv4 or IPv6 address as a 128-bit key (IPv4 mapped, see `v4_mapped`).
pub fn parse_ip(s: &str) -> Result<u128, String> {
    if s.contains(':') {
        return s
            .parse::<std::net::Ipv6Addr>()
            .map(u128::from)
            .map_err(|_| format!("bad IPv6 address {s:?}"));
    }
    parse_ipv4(s).map(v4_mapped)
}

/// "a.b.c.d/n" or "x::/n" (a bare address = a host prefix) -> (network, prefix
/// length) in the 128-bit key space: an IPv4 prefix /n becomes /(96+n).
pub fn parse_prefix(s: &str) -> Result<(u128, u8), String> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (
            a,
            Some(l.parse::<u8>().map_err(|_| format!("bad prefix {s:?}"))?),
        ),
        None => (s, None),
    };
    let v6 = addr.contains(':');
    let max = if v6 { 128 } else { 32 };
    let len = len.unwrap_or(max);
    if len > max {
        return Err(format!("bad prefix {s:?}"));
    }
    let len = if v6 { len } else { len + 96 };
    Ok((parse_ip(addr)? & prefix_mask(len), len))
}

/// The 128-bit mask of a prefix length.
pub fn prefix_mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC {s:?}"));
    }
    let mut mac = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        mac[i] = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC {s:?}"))?;
    }
    Ok(mac)
}

impl Config {
    pub fn load(path: &str) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        let cfg: Config = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        if cfg.ports.is_empty() {
            return Err(format!("{path}: no ports"));
        }
        let known = |p: &str| cfg.ports.iter().any(|q| q.name == p);
        for r in &cfg.routes {
            if !known(&r.port) {
                return Err(format!(
                    "{path}: route {} to unknown port {}",
                    r.prefix, r.port
                ));
            }
        }
        for (a, b, _) in &cfg.port_pipes {
            if !known(a) || !known(b) {
                return Err(format!("{path}: port pipe {a}->{b} names an unknown port"));
            }
        }
        for (a, b, _) in &cfg.captures {
            if !cfg.port_pipes.iter().any(|(x, y, _)| x == a && y == b) {
                return Err(format!("{path}: capture {a}->{b} has no port pipe"));
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_macs() {
        assert_eq!(
            parse_prefix("10.1.2.3/16").unwrap(),
            (v4_mapped(0x0a01_0000), 112)
        );
        assert_eq!(
            parse_prefix("10.1.2.3").unwrap(),
            (v4_mapped(0x0a01_0203), 128)
        );
        assert_eq!(parse_prefix("0.0.0.0/0").unwrap(), (v4_mapped(0), 96));
        assert!(parse_prefix("10.1.2.3/33").is_err());
        let net = 0xfd00_5e11_u128 << 96;
        assert_eq!(parse_prefix("fd00:5e11::/49").unwrap(), (net, 49));
        assert_eq!(parse_prefix("fd00:5e11::7/64").unwrap(), (net, 64));
        assert_eq!(parse_prefix("fd00:5e11::7").unwrap(), (net | 7, 128));
        assert_eq!(parse_prefix("::/0").unwrap(), (0, 0));
        assert!(parse_prefix("fd00::/129").is_err());
        assert!(parse_prefix("fd00::zz/64").is_err());
        assert_eq!(parse_ip("10.0.0.1").unwrap(), 0xffff_0a00_0001);
        assert_eq!(
            parse_mac("02:00:0a:ff:00:01").unwrap(),
            [2, 0, 10, 255, 0, 1]
        );
        assert!(parse_mac("02:00").is_err());
    }
}
