//! `<COMMAND> HELP` replies, in Redis's shape: a header naming the command,
//! the command's own lines, then HELP itself, each a simple string.

use resp::ReplyWriter;

/// Writes the help of `cmd` (upper case) whose subcommands `lines` describe.
pub fn reply(out: &mut ReplyWriter, cmd: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in lines {
        out.simple(line);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}
