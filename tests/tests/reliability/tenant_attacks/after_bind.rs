//! See [`super`].
