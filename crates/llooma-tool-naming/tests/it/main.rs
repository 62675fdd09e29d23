//! Integration tests of llooma-tool-naming: the naming table, the grouping table, the budget.

mod budget;
mod grouping;
mod naming;
mod props;
