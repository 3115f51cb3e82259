/// The one exit-code rule of every `3dstape` command, applied in one place (the CLI's entry point):
/// - 0, `ok`: the job ran and found nothing wrong;
/// - 1, `problemFound`: the job ran and found a problem: a difference, a failed verdict, an invalid session, a failure
///   while working (a file that cannot be read, a connection refused, a disk full);
/// - 2, `usage`: the command could not start as asked: an unknown option or command, a bad value, a missing argument,
///   or an output file that exists without `--force` (`UsageError`, `InvalidArguments`).
/// Signals keep the shell's convention (130 for SIGINT, 143 for SIGTERM) where a command reports being interrupted.
public enum ExitStatus {
    public static let ok: Int32 = 0
    public static let problemFound: Int32 = 1
    public static let usage: Int32 = 2
}
