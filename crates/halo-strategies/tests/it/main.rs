//! Context strategies in a running agent, against a model that reports what a provider's
//! prompt cache would read (the leading bytes a request shares with the previous one):
//! a 200-step session keeps its requests inside the window with few rewrites and a high
//! cached share, and over random sessions the invariants of the seam hold.

mod props;
mod session;
mod truncate;
