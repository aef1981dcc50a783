//! Pieces the pages share: live updates while something is in progress (`live`), the outcome
//! line of an action (`notice`), and the sortable table of a job's CSV output (`grid`).

pub mod grid;
pub mod live;
pub mod notice;
