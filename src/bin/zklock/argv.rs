//! The argv shim: a subcommand given after options (`zklock --hosts H holders PATH`, as 0.2
//! took it) is put first, where clap looks for it.

use crate::cli::command;

/// Every name (long, short, alias, hidden or not) of the options whose value may be the next
/// word of the command line (`--hosts H`, `-w 3`), at the top level and in each subcommand, as
/// `cmd` defines them: an option added to the definition is known here, with no list to keep
/// by hand. An option whose value must be attached (`--revocable=kill`, `--man=PAGE`) takes no
/// next word, so it is not one.
fn options_taking_a_value(mut cmd: clap::Command) -> Vec<String> {
    cmd.build();
    let mut names: Vec<String> = std::iter::once(&cmd)
        .chain(cmd.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .filter(|arg| {
            !arg.is_positional() && arg.get_action().takes_values() && !arg.is_require_equals_set()
        })
        .flat_map(names_of)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Every name an option answers to on the command line: `--long`, `-s`, and their aliases.
fn names_of(arg: &clap::Arg) -> Vec<String> {
    let longs = arg
        .get_long()
        .into_iter()
        .chain(arg.get_all_aliases().unwrap_or_default());
    let shorts = arg
        .get_short()
        .into_iter()
        .chain(arg.get_all_short_aliases().unwrap_or_default());
    longs
        .map(|l| format!("--{l}"))
        .chain(shorts.map(|s| format!("-{s}")))
        .collect()
}

/// Puts a subcommand given after options (`zklock --hosts H holders PATH`, as 0.2 took it)
/// first, where the parser looks for it. A lock path starts with '/', so the first operand
/// named `holders` or `revoke` is the subcommand; the value of an option that takes one (by
/// [`command`]'s definition) is never taken for it.
pub(crate) fn subcommand_first(argv: Vec<String>) -> Vec<String> {
    move_subcommand_first(argv, &options_taking_a_value(command()))
}

/// [`subcommand_first`], knowing the options that take a value by `takes_value`'s names.
fn move_subcommand_first(mut argv: Vec<String>, takes_value: &[String]) -> Vec<String> {
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].as_str();
        if a == "--" || (!a.starts_with('-') && a != "holders" && a != "revoke") {
            break;
        }
        if a == "holders" || a == "revoke" {
            let sub = argv.remove(i);
            argv.insert(1, sub);
            break;
        }
        i += if takes_value.iter().any(|o| o == a) {
            2
        } else {
            1
        };
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subcommand_after_options_is_found() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            subcommand_first(v(&["zklock", "--hosts", "h:1", "-v", "holders", "/p"])),
            v(&["zklock", "holders", "--hosts", "h:1", "-v", "/p"])
        );
        // A value that happens to be `holders` stays a value; a path stops the search.
        assert_eq!(
            subcommand_first(v(&["zklock", "--holder-id", "holders", "/p", "revoke"])),
            v(&["zklock", "--holder-id", "holders", "/p", "revoke"])
        );
    }

    /// Each option clap takes with a value, by each of its names, at the top level and in each
    /// subcommand, has that value skipped by the shim (a value that happens to be `holders`
    /// stays a value); one whose value must be attached leaves the next word alone. The check
    /// finds an option the shim does not know, as the hand-kept list would have missed the
    /// next option added (--server-tick-ms was the last).
    #[test]
    fn the_shim_knows_every_option_that_takes_a_value() {
        let mut cmd = command();
        cmd.build();
        // (name, whether clap takes its value from the next word), from the built definition:
        // an option of at least one value, unless it must be attached (`--revocable=kill`).
        let mut options: Vec<(String, bool)> = std::iter::once(&cmd)
            .chain(cmd.get_subcommands())
            .flat_map(|c| c.get_arguments())
            .filter(|arg| !arg.is_positional() && arg.get_action().takes_values())
            .flat_map(|arg| {
                let n = arg.get_num_args().expect("a built definition has num_args");
                let next_word = n.min_values() > 0 && !arg.is_require_equals_set();
                names_of(arg).into_iter().map(move |name| (name, next_word))
            })
            .collect();
        options.sort();
        options.dedup();
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // The options the shim gets wrong.
        let wrong = |shim: &dyn Fn(Vec<String>) -> Vec<String>| {
            options
                .iter()
                .filter(|(name, next_word)| {
                    let argv = v(&["zklock", name, "holders", "/p"]);
                    let kept = shim(argv.clone()) == argv;
                    kept != *next_word
                })
                .map(|(name, _)| name.clone())
                .collect::<Vec<_>>()
        };
        assert!(
            options.iter().any(|(n, _)| n == "--server-tick-ms"),
            "{options:?}"
        );
        assert!(options.iter().any(|(n, _)| n == "-w"), "{options:?}");
        assert!(
            options.iter().any(|(n, w)| n == "--revocable" && !w),
            "{options:?}"
        );
        assert_eq!(wrong(&subcommand_first), Vec::<String>::new());
        // A shim that does not know one of them is caught.
        let forgetful: Vec<String> = options_taking_a_value(command())
            .into_iter()
            .filter(|o| o != "--server-tick-ms")
            .collect();
        let shim = |argv| move_subcommand_first(argv, &forgetful);
        assert_eq!(wrong(&shim), ["--server-tick-ms"]);
    }
}
