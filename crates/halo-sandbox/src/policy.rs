//! Safety policies as tool hooks: a command denylist, user approval, output truncation and
//! permission presets.
