//! A response body read up to a bound: whole, or cut at the bound (both
//! HTTP paths, reqwest's and the direct one in `fast`, give one).

pub enum Body {
    Whole(Vec<u8>),
    /// Over the limit: what was read (up to the limit) and how much was seen
    /// (the declared length, or what arrived before the read stopped).
    Cut {
        head: Vec<u8>,
        seen: u64,
    },
}
