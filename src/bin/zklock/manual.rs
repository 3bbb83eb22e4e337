//! `zklock --man[=PAGE]`: the manual pages, made from the command's definition.

use crate::cli::command;

/// The manual page `page` (zklock, zklock-holders, zklock-revoke) in roff; None if there is no
/// such page. Every page it cites is one of these (`zklock help` has none).
pub(crate) fn manual_page(page: &str) -> Option<Vec<u8>> {
    let mut cmd = command().disable_help_subcommand(true);
    cmd.build();
    let cmd = match page {
        "zklock" => cmd,
        _ => cmd
            .get_subcommands()
            .find(|s| s.get_display_name() == Some(page))?
            .clone(),
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out).ok()?;
    Some(out)
}
