//! One parameter of an operation, as the OpenAPI document declares it:
//! where it goes on the wire and how it is spelled there (`serialize`
//! writes it, `api` reads it from the document).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Path,
    Query,
    Header,
    Cookie,
}

impl Location {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "path" => Self::Path,
            "query" => Self::Query,
            "header" => Self::Header,
            "cookie" => Self::Cookie,
            _ => return None,
        })
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
            Self::Header => "header",
            Self::Cookie => "cookie",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Param {
    /// The argument's name in the tool's input.
    pub arg: String,
    /// The name on the wire.
    pub name: String,
    pub location: Location,
    /// `form`, `simple`, `label`, `matrix`, `spaceDelimited`, `pipeDelimited`, `deepObject`.
    pub style: String,
    pub explode: bool,
    /// Declared with `content` instead of `schema`: sent as JSON text.
    pub json: bool,
    pub allow_reserved: bool,
}
