//! Who is calling and how much of the front each caller may hold: the HTTP
//! guard, principals and their tools, limits and call slots.

pub(crate) mod call_slots;
pub(crate) mod guard;
pub(crate) mod limits;
pub(crate) mod oauth;
mod oauth_cache;
pub(crate) mod principals;
