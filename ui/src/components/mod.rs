//! Pieces the pages share: live updates while something is in progress (`live`), the outcome
//! line of an action (`notice`), the sortable table of a job's CSV output (`grid`), the filter
//! and paging of long lists (`list_filter`), and "View trace" (`view_trace`: a streamer through
//! the tenant API).

pub mod grid;
pub mod list_filter;
pub mod live;
pub mod notice;
pub mod view_trace;
