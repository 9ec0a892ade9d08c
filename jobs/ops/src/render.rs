//! Tables rendered from the catalogue.
