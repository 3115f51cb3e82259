import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TapCore
import TapNet

/// A command that 3dstape runs and must stay in control of (the client a `timeouts` sweep drives): started in a process
/// group of its own, with its standard streams on /dev/null and the default action for the signals 3dstape ignores,
/// waited for against a deadline, and ended as a whole group (SIGTERM, then SIGKILL after a grace period), every member
/// it can reach reaped. Nothing waits on a pipe, so a backgrounded grandchild that keeps one open cannot hold the sweep.
struct CommandGroup {
    /// The leader's process id, which is also the group's id.
    let pid: pid_t

    /// How the command ended.
    struct Ending {
        /// The leader's exit status when it ended by itself (128 + the signal when a signal 3dstape did not send ended it).
        var exitStatus: Int32?
        /// The deadline passed before the group was done, and what was left of it was ended.
        var timedOut = false
        /// The wait was told to stop (SIGINT or SIGTERM to 3dstape), and what was left of the group was ended.
        var stopped = false
        /// The leader had exited, and members it left behind were ended after the grace `wait` was given.
        var leftoversEnded = false
        /// When 3dstape began to end the group (Unix time), if it did: a connection the command closed after it was closed by
        /// that, not by the command giving up.
        var endedAt: Double?
    }

    /// A command that could not be started, with the system's reason.
    struct StartFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// How long the group has between SIGTERM and SIGKILL.
    static let grace: Duration = .seconds(2)
    /// The longest wait for killed members to go (one in uninterruptible sleep may take a moment).
    static let killWait: Duration = .seconds(5)
    /// How often a wait looks at the group.
    static let pollMicroseconds: useconds_t = 10_000
    /// Signals 3dstape may ignore (a watcher sets SIGINT, SIGTERM and SIGPIPE to SIG_IGN, and `exec` keeps SIG_IGN) that
    /// the command gets back at their default action.
    static let resetSignals = [SIGINT, SIGTERM, SIGPIPE, SIGQUIT, SIGHUP, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGALRM]

    /// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER): a member whose parent has
    /// exited (`sleep 12 &` in a shell that exits) is then reaped here when it ends, not left a zombie for init.
    static func adoptOrphans() {
        Platform.adoptOrphans()
    }

    /// Refuses, before anything starts, a command that cannot be started: no program, a path that does not exist or is not
    /// an executable file, or a name found nowhere on `searchPath` (PATH, as `posix_spawnp` searches it; its default when
    /// unset). The one check of `timeouts` and `check`; the error names the program and why.
    static func checkStartable(_ argv: [String], searchPath: String? = ProcessInfo.processInfo.environment["PATH"]) throws(StartFailure) {
        guard let program = argv.first, !program.isEmpty else { throw StartFailure(description: "no command to run") }
        let shown = TerminalText.escaped(program)
        if program.contains("/") {
            if let why = notExecutable(program) { throw StartFailure(description: "cannot start \(shown): \(why)") }
            return
        }
        let directories = (searchPath ?? "/bin:/usr/bin").split(separator: ":", omittingEmptySubsequences: false)
            .map { $0.isEmpty ? "." : String($0) } // an empty entry is the current directory, as for the shell
        var found: String?
        for dir in directories {
            let candidate = (dir as NSString).appendingPathComponent(program)
            guard let why = notExecutable(candidate) else { return }
            if why != "no such file" && found == nil { found = "\(candidate): \(why)" }
        }
        throw StartFailure(description: "cannot start \(shown): " + (found.map { TerminalText.escaped($0) } ?? "not found on PATH"))
    }

    /// Why `path` cannot be executed (`no such file`, `a directory`, `not executable`), or nil when it can.
    private static func notExecutable(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return errno == ENOENT || errno == ENOTDIR ? "no such file" : String(cString: strerror(errno)) }
        if st.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
        if st.st_mode & S_IFMT != S_IFREG { return "not a regular file" }
        return access(path, X_OK) == 0 ? nil : "not executable (\(String(cString: strerror(errno))))"
    }

    /// Exit statuses by which a shell or `exec` says that a command could not be run: 126 (found, not executable) and 127
    /// (not found).
    static let notStartedStatuses: Set<Int32> = [126, 127]

    /// Starts `argv` (its first element looked up in PATH when it has no slash) with `environment`; its standard output
    /// and error go to the file `output` (created or emptied) when one is given, to /dev/null otherwise.
    static func start(_ argv: [String], environment: [String: String], output: String? = nil) throws(StartFailure) -> CommandGroup {
        guard let program = argv.first, !program.isEmpty else { throw StartFailure(description: "no command") }
        // Darwin's spawn types are opaque pointers that _init allocates; Glibc's are structs.
        #if canImport(Darwin)
        var attributes: posix_spawnattr_t? = nil
        #else
        var attributes = posix_spawnattr_t()
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t(), mask = sigset_t()
        sigemptyset(&defaults)
        sigemptyset(&mask)
        for s in resetSignals { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        // No signal blocked: the mask is inherited through exec (Foundation's Process gave the command one with nearly every
        // signal blocked, SIGTERM included, so its terminate() never ended it and the sweep waited on it for ever).
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setpgroup(&attributes, 0) // a group of its own, its id the leader's pid
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        #if canImport(Darwin)
        var files: posix_spawn_file_actions_t? = nil
        #else
        var files = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&files)
        defer { posix_spawn_file_actions_destroy(&files) }
        // Standard input too: a command in a background group that read the terminal would be stopped (SIGTTIN).
        posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0)
        if let output {
            posix_spawn_file_actions_addopen(&files, 1, output, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o600)
            posix_spawn_file_actions_adddup2(&files, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0)
        }
        let cArguments = argv.map { strdup($0) } + [nil]
        let cEnvironment = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (cArguments + cEnvironment).forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, program, &files, &attributes, cArguments, cEnvironment)
        guard result == 0 else { throw StartFailure(description: "cannot start \(program): \(String(cString: strerror(result)))") }
        return CommandGroup(pid: pid)
    }

    /// The longest wait `wait(atMost:)` takes (a longer or non-finite one is cut to it).
    static let longestWait = 365.0 * 86_400

    /// Waits until the leader and every other member of its group have ended, `seconds` have passed or `shouldStop` says
    /// so; in the last two cases ends what is left of the group. Returns with no member of the group left.
    /// With `leaderGrace`, members still running that long after the leader exited are ended too (a Gradle or adb daemon
    /// the command started must not hold the run until its timeout), and the leader's own exit status stands.
    func wait(atMost seconds: Double, leaderGrace: Double? = nil, shouldStop: () -> Bool) -> Ending {
        var deadline = ContinuousClock.now + .seconds(seconds.isFinite ? min(max(seconds, 0), CommandGroup.longestWait) : CommandGroup.longestWait)
        var graceStarted = false
        var ending = Ending()
        var leaderReaped = false
        while true {
            reap(&leaderReaped, status: &ending.exitStatus)
            if leaderReaped, !groupExists { return ending }
            if leaderReaped, let grace = leaderGrace, !graceStarted {
                graceStarted = true
                deadline = min(deadline, ContinuousClock.now + .seconds(max(0, grace)))
            }
            if shouldStop() { ending.stopped = true; break }
            if ContinuousClock.now >= deadline {
                if graceStarted { ending.leftoversEnded = true } else { ending.timedOut = true }
                break
            }
            usleep(CommandGroup.pollMicroseconds)
        }
        if !leaderReaped, ending.exitStatus == nil { reap(&leaderReaped, status: &ending.exitStatus) } // it may just have ended
        var killed: Int32? // the leader's status after 3dstape's signals is not its own exit status
        ending.endedAt = Date().timeIntervalSince1970
        send(SIGTERM, leaderReaped: leaderReaped)
        send(SIGCONT, leaderReaped: leaderReaped) // a stopped member acts on SIGTERM only once continued
        if !waitGone(within: CommandGroup.grace, &leaderReaped, &killed) {
            send(SIGKILL, leaderReaped: leaderReaped)
            _ = waitGone(within: CommandGroup.killWait, &leaderReaped, &killed)
        }
        return ending
    }

    /// Whether any process of the group is left (one that 3dstape may not signal counts as left).
    private var groupExists: Bool { kill(-pid, 0) == 0 || errno == EPERM }

    /// Reaps every ended member it can (the leader, and orphans adopted here); the leader's status goes to `status`.
    private func reap(_ leaderReaped: inout Bool, status: inout Int32?) {
        var raw: Int32 = 0
        while true {
            let r = waitpid(-pid, &raw, WNOHANG)
            guard r > 0 else { break }
            if r == pid { leaderReaped = true; status = CommandGroup.exitStatus(raw) }
        }
        if !leaderReaped { // a leader that moved itself to another group (setsid) is not found by -pid
            let r = waitpid(pid, &raw, WNOHANG)
            if r == pid { leaderReaped = true; status = CommandGroup.exitStatus(raw) } else if r < 0, errno == ECHILD { leaderReaped = true }
        }
    }

    /// Sends `sig` to the group, and to the leader itself while it is not reaped (its pid cannot be reused until then).
    private func send(_ sig: Int32, leaderReaped: Bool) {
        kill(-pid, sig)
        if !leaderReaped { kill(pid, sig) }
    }

    /// Reaps until nothing of the group is left or `limit` has passed; whether nothing is left.
    private func waitGone(within limit: Duration, _ leaderReaped: inout Bool, _ status: inout Int32?) -> Bool {
        let end = ContinuousClock.now + limit
        while true {
            reap(&leaderReaped, status: &status)
            if leaderReaped, !groupExists { return true }
            if ContinuousClock.now >= end { return false }
            usleep(CommandGroup.pollMicroseconds)
        }
    }

    /// A wait status as a shell shows it: the exit code, or 128 + the signal that ended the process.
    static func exitStatus(_ raw: Int32) -> Int32? {
        let sig = raw & 0x7F
        if sig == 0 { return (raw >> 8) & 0xFF }
        return sig == 0x7F ? nil : 128 + sig // 0x7F: stopped, not ended (not asked for here)
    }
}
