//! GitHub's error bodies and pagination, shared by every REST handler.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const DOCS: &str = "https://docs.github.com/rest";

/// An error answered the way GitHub answers it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{status}: {message}")]
    Plain { status: StatusCode, message: String },
    #[error("validation failed")]
    Validation { errors: Vec<Value> },
    /// GitHub's other 422: `Unprocessable Entity` with plain-text errors
    /// (a review comment on a line outside the diff, for one).
    #[error("unprocessable entity")]
    Unprocessable { errors: Vec<String> },
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError::Plain {
            status,
            message: message.into(),
        }
    }
    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Not Found")
    }
    pub fn forbidden(message: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }
    /// GitHub's answer to a token request for, or any call with a token
    /// of, a suspended installation.
    pub fn installation_suspended() -> Self {
        Self::forbidden("This installation has been suspended")
    }
    pub fn bad_credentials() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Bad credentials")
    }
    pub fn requires_auth() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Requires authentication")
    }
    /// GitHub's 422 with one `{resource, field, code}` error.
    pub fn validation(resource: &str, field: &str, code: &str) -> Self {
        ApiError::Validation {
            errors: vec![json!({"resource": resource, "field": field, "code": code})],
        }
    }
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Plain { status, .. } => *status,
            ApiError::Validation { .. } | ApiError::Unprocessable { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match self {
            ApiError::Plain { message, .. } => {
                json!({"message": message, "documentation_url": DOCS, "status": status.as_u16().to_string()})
            }
            ApiError::Validation { errors } => json!({
                "message": "Validation Failed",
                "errors": errors,
                "documentation_url": DOCS,
                "status": "422",
            }),
            ApiError::Unprocessable { errors } => json!({
                "message": "Unprocessable Entity",
                "errors": errors,
                "documentation_url": DOCS,
                "status": "422",
            }),
        };
        (status, Json(body)).into_response()
    }
}

pub type ApiResult = Result<Response, ApiError>;

/// `200` with a JSON body.
pub fn ok(body: Value) -> ApiResult {
    Ok(Json(body).into_response())
}

/// `201 Created` with a JSON body.
pub fn created(body: Value) -> ApiResult {
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// Page selection read from `per_page` / `page` (GitHub: default 30, max 100).
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub per_page: usize,
    pub page: usize,
}

impl Page {
    pub fn from_uri(uri: &Uri) -> Self {
        let mut page = Page {
            per_page: 30,
            page: 1,
        };
        for (k, v) in query_pairs(uri) {
            match k.as_str() {
                "per_page" => page.per_page = v.parse::<usize>().unwrap_or(30).clamp(1, 100),
                "page" => page.page = v.parse::<usize>().unwrap_or(1).max(1),
                _ => {}
            }
        }
        page
    }
}

/// Decoded query-string pairs, in order.
pub fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    let Some(q) = uri.query() else {
        return Vec::new();
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

pub fn query_value(uri: &Uri, key: &str) -> Option<String> {
    query_pairs(uri)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2]))
            {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Cut one page out of `items` and build the `Link` header GitHub sends.
pub fn page_of<T: Clone>(items: &[T], uri: &Uri, base: &str) -> (Vec<T>, Option<HeaderValue>) {
    let page = Page::from_uri(uri);
    let total = items.len();
    let last = total.div_ceil(page.per_page).max(1);
    let start = (page.page - 1).saturating_mul(page.per_page).min(total);
    let end = (start + page.per_page).min(total);
    let slice = items[start..end].to_vec();
    let link_to = |n: usize| {
        let mut pairs: Vec<(String, String)> = query_pairs(uri)
            .into_iter()
            .filter(|(k, _)| k != "page" && k != "per_page")
            .collect();
        pairs.push(("per_page".into(), page.per_page.to_string()));
        pairs.push(("page".into(), n.to_string()));
        let q: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", encode_query(v)))
            .collect();
        format!("<{base}{}?{}>", uri.path(), q.join("&"))
    };
    let mut links = Vec::new();
    if page.page < last {
        links.push(format!("{}; rel=\"next\"", link_to(page.page + 1)));
        links.push(format!("{}; rel=\"last\"", link_to(last)));
    }
    if page.page > 1 {
        links.push(format!("{}; rel=\"first\"", link_to(1)));
        links.push(format!("{}; rel=\"prev\"", link_to(page.page - 1)));
    }
    let header = (!links.is_empty())
        .then(|| HeaderValue::from_str(&links.join(", ")).ok())
        .flatten();
    (slice, header)
}

fn encode_query(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~,:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A JSON array answered one page at a time with a `Link` header.
pub fn paginated(items: Vec<Value>, uri: &Uri, base: &str) -> ApiResult {
    let (slice, link) = page_of(&items, uri, base);
    let mut headers = HeaderMap::new();
    if let Some(link) = link {
        headers.insert(header::LINK, link);
    }
    Ok((headers, Json(Value::Array(slice))).into_response())
}

/// A request body parsed as JSON without insisting on a content type, with
/// GitHub's `400 Problems parsing JSON` on malformed input. An empty body is
/// an empty object.
pub struct JsonBody(pub Value);

impl<S: Send + Sync> axum::extract::FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "Problems parsing JSON"))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(json!({})));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "Problems parsing JSON"))
    }
}

/// A string field of a JSON body, `None` when absent, 422 when not a string.
pub fn opt_str(body: &Value, field: &str, resource: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::validation(resource, field, "invalid")),
    }
}

/// A list of strings, accepting GitHub's alternative `[{"name": …}]` form.
pub fn str_list(value: &Value, resource: &str, field: &str) -> Result<Vec<String>, ApiError> {
    let Some(items) = value.as_array() else {
        return Err(ApiError::validation(resource, field, "invalid"));
    };
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.clone()),
            Value::Object(o) => o
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| ApiError::validation(resource, field, "invalid")),
            _ => Err(ApiError::validation(resource, field, "invalid")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn middle_page_links_next_last_first_and_prev_keeping_other_filters() {
        let uri: Uri = "/repos/o/r/issues?state=all&per_page=10&page=2"
            .parse()
            .unwrap();
        let items: Vec<u32> = (0..25).collect();
        let (slice, link) = page_of(&items, &uri, "http://h");
        assert_eq!(slice, (10..20).collect::<Vec<_>>());
        let link = link.unwrap().to_str().unwrap().to_string();
        assert!(
            link.contains("<http://h/repos/o/r/issues?state=all&per_page=10&page=3>; rel=\"next\""),
            "{link}"
        );
        assert!(link.contains("page=3>; rel=\"last\""), "{link}");
        assert!(link.contains("page=1>; rel=\"first\""), "{link}");
        assert!(link.contains("page=1>; rel=\"prev\""), "{link}");
    }

    #[test]
    fn a_single_page_has_no_link_header_and_per_page_is_capped_at_100() {
        let uri: Uri = "/x?per_page=1000".parse().unwrap();
        assert_eq!(Page::from_uri(&uri).per_page, 100);
        let (slice, link) = page_of(&[1, 2, 3], &uri, "http://h");
        assert_eq!((slice.len(), link.is_none()), (3, true));
    }

    #[test]
    fn query_values_are_percent_decoded_without_panicking_on_bad_escapes() {
        let uri: Uri = "/x?head=alice%3Aautoforge%2F1&bad=%zz&utf=%C3%A9"
            .parse()
            .unwrap();
        assert_eq!(
            query_value(&uri, "head").as_deref(),
            Some("alice:autoforge/1")
        );
        assert_eq!(query_value(&uri, "bad").as_deref(), Some("%zz"));
        assert_eq!(query_value(&uri, "utf").as_deref(), Some("é"));
    }
}
