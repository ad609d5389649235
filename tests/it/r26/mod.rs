//! Regression tests of issue 26 (faults found as a new user, third batch), one module per
//! item: untrusted candidates that hid trusted ones (1), stores without conditional writes
//! and other optional features (2), servers that ignore `Range` (3), restore and save
//! outcomes that overstated (4), archive checks (5), messages (6), fresh machines (7).

mod archives;
mod messages;
mod optional;
mod outcomes;
mod range;
mod trust;
