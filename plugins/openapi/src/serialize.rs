//! Arguments → a request's URL, headers and cookies, following each
//! parameter's `style` and `explode` (OpenAPI 3, "Style Values").

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use crate::param::{Location, Param};

/// RFC 3986 unreserved characters stay; everything else is encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// `allowReserved`: reserved characters stay as well.
const RESERVED_OK: &AsciiSet = &COMPONENT
    .remove(b':')
    .remove(b'/')
    .remove(b'?')
    .remove(b'#')
    .remove(b'[')
    .remove(b']')
    .remove(b'@')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=');

fn enc(s: &str, reserved_ok: bool) -> String {
    utf8_percent_encode(s, if reserved_ok { RESERVED_OK } else { COMPONENT }).to_string()
}

/// A scalar as text: strings as they are, other values as JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What one parameter adds to a request.
#[derive(Debug, Default, PartialEq)]
pub struct Parts {
    /// Query pairs, already encoded (`name=value`).
    pub query: Vec<String>,
    pub headers: Vec<(String, String)>,
    pub cookies: Vec<String>,
}

/// The path with its `{name}` templates filled in.
pub fn fill_path(path: &str, params: &[Param], args: &serde_json::Map<String, Value>) -> String {
    let mut out = path.to_string();
    for p in params.iter().filter(|p| p.location == Location::Path) {
        let Some(v) = args.get(&p.arg).filter(|v| !v.is_null()) else {
            continue;
        };
        out = out.replace(&format!("{{{}}}", p.name), &path_value(p, v));
    }
    out
}

fn path_value(p: &Param, v: &Value) -> String {
    if p.json {
        return enc(&v.to_string(), false);
    }
    let e = |s: &str| enc(s, false);
    let name = &p.name;
    match (p.style.as_str(), v) {
        ("label", Value::Array(a)) => {
            let sep = if p.explode { "." } else { "," };
            format!(
                ".{}",
                a.iter()
                    .map(|x| e(&scalar(x)))
                    .collect::<Vec<_>>()
                    .join(sep)
            )
        }
        ("label", Value::Object(o)) => {
            if p.explode {
                format!(
                    ".{}",
                    o.iter()
                        .map(|(k, x)| format!("{}={}", e(k), e(&scalar(x))))
                        .collect::<Vec<_>>()
                        .join(".")
                )
            } else {
                format!(
                    ".{}",
                    o.iter()
                        .flat_map(|(k, x)| [e(k), e(&scalar(x))])
                        .collect::<Vec<_>>()
                        .join(",")
                )
            }
        }
        ("label", x) => format!(".{}", e(&scalar(x))),
        ("matrix", Value::Array(a)) => {
            if p.explode {
                a.iter()
                    .map(|x| format!(";{name}={}", e(&scalar(x))))
                    .collect()
            } else {
                format!(
                    ";{name}={}",
                    a.iter()
                        .map(|x| e(&scalar(x)))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            }
        }
        ("matrix", Value::Object(o)) => {
            if p.explode {
                o.iter()
                    .map(|(k, x)| format!(";{}={}", e(k), e(&scalar(x))))
                    .collect()
            } else {
                format!(
                    ";{name}={}",
                    o.iter()
                        .flat_map(|(k, x)| [e(k), e(&scalar(x))])
                        .collect::<Vec<_>>()
                        .join(",")
                )
            }
        }
        ("matrix", x) => format!(";{name}={}", e(&scalar(x))),
        // simple
        (_, Value::Array(a)) => a
            .iter()
            .map(|x| e(&scalar(x)))
            .collect::<Vec<_>>()
            .join(","),
        (_, Value::Object(o)) => {
            if p.explode {
                o.iter()
                    .map(|(k, x)| format!("{}={}", e(k), e(&scalar(x))))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                o.iter()
                    .flat_map(|(k, x)| [e(k), e(&scalar(x))])
                    .collect::<Vec<_>>()
                    .join(",")
            }
        }
        (_, x) => e(&scalar(x)),
    }
}

/// The query pairs, headers and cookies of the non-path parameters.
pub fn parts(params: &[Param], args: &serde_json::Map<String, Value>) -> Parts {
    let mut out = Parts::default();
    for p in params {
        // A null optional parameter is left out, not sent empty.
        let Some(v) = args.get(&p.arg).filter(|v| !v.is_null()) else {
            continue;
        };
        match p.location {
            Location::Path => {}
            Location::Query => query(p, v, &mut out.query),
            Location::Header => out.headers.push((p.name.clone(), header_value(p, v))),
            Location::Cookie => {
                let text = if p.json {
                    v.to_string()
                } else {
                    flat(v, p.explode, ",")
                };
                out.cookies
                    .push(format!("{}={}", p.name, enc(&text, false)));
            }
        }
    }
    out
}

fn header_value(p: &Param, v: &Value) -> String {
    if p.json {
        return v.to_string();
    }
    flat(v, p.explode, ",")
}

/// Arrays and objects joined with `sep` (`explode` writes objects `k=v`).
fn flat(v: &Value, explode: bool, sep: &str) -> String {
    match v {
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(sep),
        Value::Object(o) if explode => o
            .iter()
            .map(|(k, x)| format!("{k}={}", scalar(x)))
            .collect::<Vec<_>>()
            .join(sep),
        Value::Object(o) => o
            .iter()
            .flat_map(|(k, x)| [k.clone(), scalar(x)])
            .collect::<Vec<_>>()
            .join(sep),
        x => scalar(x),
    }
}

fn query(p: &Param, v: &Value, out: &mut Vec<String>) {
    let r = p.allow_reserved;
    let name = enc(&p.name, false);
    if p.json {
        out.push(format!("{name}={}", enc(&v.to_string(), r)));
        return;
    }
    match (p.style.as_str(), v) {
        ("deepObject", Value::Object(o)) => {
            for (k, x) in o {
                out.push(format!(
                    "{name}%5B{}%5D={}",
                    enc(k, false),
                    enc(&scalar(x), r)
                ));
            }
        }
        ("spaceDelimited" | "pipeDelimited", Value::Array(a)) if !p.explode => {
            let sep = if p.style == "spaceDelimited" {
                "%20"
            } else {
                "%7C"
            };
            let joined: Vec<String> = a.iter().map(|x| enc(&scalar(x), r)).collect();
            out.push(format!("{name}={}", joined.join(sep)));
        }
        (_, Value::Array(a)) if p.explode => {
            for x in a {
                out.push(format!("{name}={}", enc(&scalar(x), r)));
            }
        }
        (_, Value::Array(a)) => {
            let joined: Vec<String> = a.iter().map(|x| enc(&scalar(x), r)).collect();
            out.push(format!("{name}={}", joined.join(",")));
        }
        (_, Value::Object(o)) if p.explode => {
            for (k, x) in o {
                out.push(format!("{}={}", enc(k, false), enc(&scalar(x), r)));
            }
        }
        (_, Value::Object(o)) => {
            let joined: Vec<String> = o
                .iter()
                .flat_map(|(k, x)| [enc(k, false), enc(&scalar(x), r)])
                .collect();
            out.push(format!("{name}={}", joined.join(",")));
        }
        (_, x) => out.push(format!("{name}={}", enc(&scalar(x), r))),
    }
}

/// An `application/x-www-form-urlencoded` body from an object.
pub fn form_body(v: &Value) -> String {
    match v {
        Value::Object(o) => o
            .iter()
            .flat_map(|(k, x)| match x {
                Value::Array(a) => a
                    .iter()
                    .map(|i| format!("{}={}", enc(k, false), enc(&scalar(i), false)))
                    .collect::<Vec<_>>(),
                other => vec![format!("{}={}", enc(k, false), enc(&scalar(other), false))],
            })
            .collect::<Vec<_>>()
            .join("&"),
        other => enc(&scalar(other), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn param(name: &str, location: Location, style: &str, explode: bool) -> Param {
        Param {
            arg: name.into(),
            name: name.into(),
            location,
            style: style.into(),
            explode,
            json: false,
            allow_reserved: false,
        }
    }

    fn q(style: &str, explode: bool, v: Value) -> String {
        let p = param("id", Location::Query, style, explode);
        let args = json!({"id": v});
        parts(&[p], args.as_object().unwrap()).query.join("&")
    }

    #[test]
    fn query_styles_follow_the_spec_table() {
        // The examples of OpenAPI 3.1, "Style Examples".
        let arr = json!([3, 4, 5]);
        let obj = json!({"role": "admin", "firstName": "Alex"});
        assert_eq!(q("form", true, json!(5)), "id=5");
        assert_eq!(q("form", true, arr.clone()), "id=3&id=4&id=5");
        assert_eq!(q("form", false, arr.clone()), "id=3,4,5");
        assert_eq!(q("form", true, obj.clone()), "role=admin&firstName=Alex");
        assert_eq!(
            q("form", false, obj.clone()),
            "id=role,admin,firstName,Alex"
        );
        assert_eq!(q("spaceDelimited", false, arr.clone()), "id=3%204%205");
        assert_eq!(q("pipeDelimited", false, arr.clone()), "id=3%7C4%7C5");
        assert_eq!(
            q("deepObject", true, obj),
            "id%5Brole%5D=admin&id%5BfirstName%5D=Alex"
        );
        assert_eq!(q("form", true, json!("a b&c")), "id=a%20b%26c");
    }

    #[test]
    fn path_styles_follow_the_spec_table() {
        let p = |style: &str, explode: bool, v: Value| {
            let p = param("id", Location::Path, style, explode);
            let args = json!({"id": v});
            fill_path("/x/{id}", &[p], args.as_object().unwrap())
        };
        assert_eq!(p("simple", false, json!([3, 4, 5])), "/x/3,4,5");
        assert_eq!(
            p("simple", true, json!({"role": "admin", "n": 1})),
            "/x/role=admin,n=1"
        );
        assert_eq!(p("label", false, json!([3, 4, 5])), "/x/.3,4,5");
        assert_eq!(p("label", true, json!([3, 4, 5])), "/x/.3.4.5");
        assert_eq!(p("matrix", true, json!([3, 4])), "/x/;id=3;id=4");
        assert_eq!(p("matrix", false, json!(5)), "/x/;id=5");
        assert_eq!(p("simple", false, json!("a/b c")), "/x/a%2Fb%20c");
    }

    #[test]
    fn headers_cookies_and_forms() {
        let h = param("X-Ids", Location::Header, "simple", false);
        let c = param("session", Location::Cookie, "form", true);
        let args = json!({"X-Ids": [1, 2], "session": "a b"});
        let parts = parts(&[h, c], args.as_object().unwrap());
        assert_eq!(parts.headers, vec![("X-Ids".into(), "1,2".into())]);
        assert_eq!(parts.cookies, vec!["session=a%20b".to_string()]);
        assert_eq!(
            form_body(&json!({"a": "x y", "b": [1, 2]})),
            "a=x%20y&b=1&b=2"
        );
    }
}
