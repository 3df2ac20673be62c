//! Test infrastructure shared by the crates' test suites: real components, started in temp
//! directories and stopped when the test process ends.

mod postgres;
mod strings;

pub use postgres::TempPostgres;
pub use strings::all_strings;
